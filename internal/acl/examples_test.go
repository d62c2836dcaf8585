package acl

import (
	"os"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The Strimzi KafkaUser in examples/kubernetes holds exactly the ACLs
// `flecht acl plan -f examples/count.yaml --principal User:count --role
// run -o yaml` prints, so the example cannot drift from the plan.
func TestKafkaUserExampleIsThePlan(t *testing.T) {
	p, err := NewPlanFrom(Flags{StageFile: "../../examples/count.yaml", Role: string(RoleRun), Principal: "User:count"})
	if err != nil {
		t.Fatal(err)
	}
	want := Strimzi(p)
	raw, err := os.ReadFile("../../examples/kubernetes/kafkauser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   KafkaUserMetadata `yaml:"metadata"`
		Spec       struct {
			Authentication struct {
				Type string `yaml:"type"`
			} `yaml:"authentication"`
			Authorization StrimziAuthorization `yaml:"authorization"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != want.Kind || got.APIVersion != want.APIVersion || got.Metadata.Name != want.Metadata.Name {
		t.Errorf("header %s %s %s, want %s %s %s", got.APIVersion, got.Kind, got.Metadata.Name, want.APIVersion, want.Kind, want.Metadata.Name)
	}
	if got.Spec.Authentication.Type != "scram-sha-512" {
		t.Errorf("authentication %q, want scram-sha-512 (examples/profiles/scram.yaml)", got.Spec.Authentication.Type)
	}
	if !reflect.DeepEqual(got.Spec.Authorization, want.Spec.Authorization) {
		t.Errorf("the example's ACLs differ from the plan's:\n got %+v\nwant %+v", got.Spec.Authorization, want.Spec.Authorization)
	}
}
