package metrics

import (
	"fmt"
	"slices"
	"testing"
)

// The 0.17 signed-value families: registered by New, labelled with the
// stage labels and scope (and kid), and counted by the secret.Observer
// methods, per observer.
func TestSignedValueFamilies(t *testing.T) {
	o := New(map[string]string{"stage": "s"})
	other := New(map[string]string{"stage": "t"})
	o.Verified("billing", "sig-1")
	o.Verified("billing", "sig-1")
	o.UnsignedRead("billing")
	other.UnsignedRead("x")
	families, err := o.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()] = append(got[f.GetName()], fmt.Sprint(labels, m.GetCounter().GetValue()))
		}
	}
	if v := got["flechtwerk_secret_verifications_total"]; !slices.Equal(v, []string{"[kid=sig-1 scope=billing stage=s] 2"}) {
		t.Errorf("verifications: %v", v)
	}
	if v := got["flechtwerk_secret_unsigned_reads_total"]; !slices.Equal(v, []string{"[scope=billing stage=s] 1"}) {
		t.Errorf("unsigned reads: %v", v)
	}
}
