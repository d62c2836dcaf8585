package verify_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/verify"
)

const (
	app     = "refine"
	sum     = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
	perPart = 10 // raw records per partition
)

var logic = lineage.ModuleLogic(sum)

// fixture is a kfake cluster with a raw topic of two partitions and the
// stage's output and dead-letter topics.
type fixture struct {
	t     *testing.T
	kf    *kfake.Cluster
	cl    *kgo.Client
	txn   *kgo.Client
	ctx   context.Context
	addrs []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "raw", "refined", "raw.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fixture{t: t, kf: c, addrs: c.ListenAddrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f.ctx = ctx
	f.cl = f.client()
	f.txn = f.client(kgo.TransactionalID(app + "-0"))
	for p := range int32(2) {
		for o := range perPart {
			f.produce(f.cl, &kgo.Record{Topic: "raw", Partition: p, Key: []byte(fmt.Sprintf("k%d", o)), Value: []byte(fmt.Sprintf(`{"n":%d}`, o))})
		}
	}
	return f
}

func (f *fixture) client(opts ...kgo.Opt) *kgo.Client {
	f.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	return cl
}

func (f *fixture) produce(cl *kgo.Client, recs ...*kgo.Record) {
	f.t.Helper()
	if err := cl.ProduceSync(f.ctx, recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// txnWrite writes the records in one committed transaction.
func (f *fixture) txnWrite(recs ...*kgo.Record) {
	f.t.Helper()
	if err := f.txn.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	f.produce(f.txn, recs...)
	if err := f.txn.EndTransaction(f.ctx, kgo.TryCommit); err != nil {
		f.t.Fatal(err)
	}
}

// outputs are what the stage makes of raw/p@o in generation gen: source
// 3 makes nothing (a filter), source 5 goes to the dead letters, source 7
// makes two records, the others one.
func outputs(gen int64, p int32, o int) []*kgo.Record {
	st := lineage.Stamp{Source: lineage.Source{Topic: "raw", Partition: p, Offset: int64(o)}, Logic: logic, Generation: gen}
	rec := func(topic, v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", o)), Value: []byte(v), Headers: st.Headers()}
	}
	switch o {
	case 3:
		return nil
	case 5:
		return []*kgo.Record{rec("raw.dlq", fmt.Sprintf(`{"bad":%d}`, o))}
	case 7:
		return []*kgo.Record{rec("refined", `{"half":1}`), rec("refined", `{"half":2}`)}
	}
	return []*kgo.Record{rec("refined", fmt.Sprintf(`{"n":%d,"gen":%d}`, o, gen))}
}

// run writes every raw record's outputs of generation gen, a transaction
// per three sources, and commits the offsets with the generation. It
// returns the places of the outputs written per source.
func (f *fixture) run(gen int64) map[string][]string {
	f.t.Helper()
	written := map[string][]string{}
	for p := range int32(2) {
		var batch []*kgo.Record
		for o := range perPart {
			out := outputs(gen, p, o)
			batch = append(batch, out...)
			if o%3 == 2 || o == perPart-1 {
				f.txnWrite(batch...)
				for _, r := range batch {
					src, _, _ := lineage.Read(r.Headers)
					written[src.Source.String()] = append(written[src.Source.String()], fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset))
				}
				batch = nil
			}
		}
	}
	f.commit(gen, perPart)
	return written
}

func (f *fixture) commit(gen int64, at int64) {
	f.t.Helper()
	var offs kadm.Offsets
	for p := range int32(2) {
		offs.Add(kadm.Offset{Topic: "raw", Partition: p, At: at, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(gen)})
	}
	if _, err := kadm.NewClient(f.cl).CommitOffsets(f.ctx, app, offs); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) verify() *verify.Report {
	f.t.Helper()
	rep, err := verify.Run(f.ctx, f.cl, verify.Request{ApplicationID: app, Inputs: []string{"raw"}, Content: unavailable{},
		Outputs: []verify.OutputTopic{{Topic: "refined", Role: verify.RoleOutput}, {Topic: "raw.dlq", Role: verify.RoleDeadLetter}}})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// findings lists the report's findings as "kind record".
func findings(rep *verify.Report) []string {
	var out []string
	for _, x := range rep.Findings {
		out = append(out, x.Kind+" "+x.Record)
	}
	sort.Strings(out)
	return out
}

func want(t *testing.T, rep *verify.Report, expect ...string) {
	t.Helper()
	sort.Strings(expect)
	if got := findings(rep); strings.Join(got, "\n") != strings.Join(expect, "\n") {
		t.Fatalf("findings:\n%s\nwant:\n%s\n(messages: %+v)", strings.Join(got, "\n"), strings.Join(expect, "\n"), rep.Findings)
	}
	if rep.Total != len(expect) {
		t.Fatalf("%d findings counted, want %d", rep.Total, len(expect))
	}
}

func TestCleanStage(t *testing.T) {
	f := newFixture(t)
	f.run(1)
	rep := f.verify()
	want(t, rep)
	// 10 sources per partition: 9 with outputs (3 filtered), 10 records.
	for _, ip := range rep.Inputs {
		if ip.Committed != perPart || ip.Generation != 1 || ip.Sources != 9 || ip.Outputs != 10 || *ip.FirstSource != 0 || *ip.LastSource != perPart-1 {
			t.Errorf("input %+v", ip)
		}
	}
	if len(rep.Outputs) != 2 || rep.Outputs[0].Records != 18 || rep.Outputs[1].Records != 2 {
		t.Errorf("outputs %+v: want 18 records in refined, 2 in raw.dlq", rep.Outputs)
	}
	if rep.Records != 20 || rep.ContentChecked || rep.ContentNotChecked == "" {
		t.Fatalf("records %d, content checked %v (%q)", rep.Records, rep.ContentChecked, rep.ContentNotChecked)
	}
}

// Each fault is found, named, and nothing else.
func TestFaultsAreNamed(t *testing.T) {
	t.Run("a record without lineage from a plain producer", func(t *testing.T) {
		f := newFixture(t)
		f.run(1)
		r := &kgo.Record{Topic: "refined", Partition: 1, Key: []byte("k1"), Value: []byte(`{"n":1,"gen":1}`)}
		f.produce(f.cl, r)
		want(t, f.verify(), fmt.Sprintf("no_lineage refined/1@%d", r.Offset))
	})
	t.Run("a duplicate", func(t *testing.T) {
		f := newFixture(t)
		f.run(1)
		dup := outputs(1, 0, 4)
		f.txnWrite(dup...)
		rep := f.verify()
		want(t, rep, fmt.Sprintf("duplicate refined/0@%d", dup[0].Offset))
		if rep.Findings[0].Source != "raw/0@4" || !strings.HasPrefix(rep.Findings[0].Duplicates, "refined/0@") {
			t.Fatalf("finding %+v", rep.Findings[0])
		}
	})
	t.Run("a source past the committed offset", func(t *testing.T) {
		f := newFixture(t)
		written := f.run(1)
		f.commit(1, 8) // the offsets moved back, the generation did not
		var expect []string
		for _, src := range []string{"raw/0@8", "raw/0@9", "raw/1@8", "raw/1@9"} {
			for _, at := range written[src] {
				expect = append(expect, "past_committed "+at)
			}
		}
		want(t, f.verify(), expect...)
	})
	t.Run("a generation newer than the committed one", func(t *testing.T) {
		f := newFixture(t)
		f.run(1)
		late := outputs(2, 1, 0)
		f.txnWrite(late...)
		want(t, f.verify(), fmt.Sprintf("past_committed refined/1@%d", late[0].Offset))
	})
	t.Run("lineage that does not read", func(t *testing.T) {
		f := newFixture(t)
		f.run(1)
		bad := outputs(1, 0, 1)[0]
		bad.Headers[2].Value = []byte("0")
		f.txnWrite(bad)
		want(t, f.verify(), fmt.Sprintf("bad_lineage refined/0@%d", bad.Offset))
	})
}

// A replay with --keep-outputs writes every output again in the next
// generation: two complete generations are clean.
func TestTwoCompleteGenerationsAreClean(t *testing.T) {
	f := newFixture(t)
	f.run(1)
	f.run(2)
	rep := f.verify()
	want(t, rep)
	if rep.Generation != 2 || len(rep.Generations) != 2 || rep.Generations[1].Sources != 18 || rep.Generations[0].Records != 20 {
		t.Fatalf("generations %+v (current %d)", rep.Generations, rep.Generation)
	}
}

// A module file other than the one the lineage names is refused.
func TestRefusesAnotherModule(t *testing.T) {
	f := newFixture(t)
	f.run(1)
	req := verify.Request{ApplicationID: app, Inputs: []string{"raw"}, Outputs: []verify.OutputTopic{{Topic: "refined", Role: verify.RoleOutput}}, Content: unavailable{},
		ModuleFile: "other.wasm", ModuleSHA256: "00" + sum[2:]}
	if _, err := verify.Run(f.ctx, f.cl, req); err == nil || !strings.Contains(err.Error(), logic) {
		t.Fatalf("another module: %v", err)
	}
	req.ModuleSHA256 = sum
	if _, err := verify.Run(f.ctx, f.cl, req); err != nil {
		t.Fatalf("the module the lineage names: %v", err)
	}
}

// A topic that is both an output and a dead-letter topic is read once.
func TestATopicNamedTwiceIsReadOnce(t *testing.T) {
	f := newFixture(t)
	f.run(1)
	rep, err := verify.Run(f.ctx, f.cl, verify.Request{ApplicationID: app, Inputs: []string{"raw"}, Content: unavailable{},
		Outputs: []verify.OutputTopic{{Topic: "refined", Role: verify.RoleOutput}, {Topic: "refined", Role: verify.RoleDeadLetter}}})
	if err != nil {
		t.Fatal(err)
	}
	want(t, rep)
	if len(rep.Outputs) != 1 || rep.Records != 18 {
		t.Fatalf("outputs %+v, %d records", rep.Outputs, rep.Records)
	}
}

// A commit a transaction holds pending is asked for again, alone, until
// it settles: the answer is the offset it settles on.
func TestCommittedWaitsForAPendingCommit(t *testing.T) {
	f := newFixture(t)
	f.commit(2, 7)
	topics, err := kadm.NewClient(f.cl).ListTopics(f.ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	rawID := topics["raw"].ID
	var asked [][]int32
	f.kf.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.kf.KeepControl()
		r := req.(*kmsg.OffsetFetchRequest)
		var ps []int32
		for _, g := range r.Groups {
			for _, t := range g.Topics {
				ps = append(ps, t.Partitions...)
			}
		}
		if len(r.Groups) == 0 { // v7 and before
			for _, t := range r.Topics {
				ps = append(ps, t.Partitions...)
			}
		}
		asked = append(asked, ps)
		if len(asked) > 2 || !r.RequireStable {
			return nil, nil, false
		}
		// Partition 0 pending twice, then the broker's own answer (the
		// commit it settled on); partition 1 answered the first time.
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = r.Version
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group = app
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = "raw", rawID // v10 names it by ID
		for _, p := range ps {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset = p, 4
			meta := lineage.OffsetMetadata(1)
			rp.Metadata = &meta
			if p == 0 {
				rp.ErrorCode, rp.Offset = kerr.UnstableOffsetCommit.Code, -1
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		rg.Topics = append(rg.Topics, rt)
		resp.Groups = append(resp.Groups, rg)
		if r.Version < 8 {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = "raw"
			for _, gp := range rt.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.Metadata, p.ErrorCode = gp.Partition, gp.Offset, gp.Metadata, gp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics, resp.Groups = append(resp.Topics, t), nil
		}
		return resp, nil, true
	})
	got, err := verify.Committed(f.ctx, f.cl, app, map[string][]int32{"raw": {0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[kafkax.TopicPartition]verify.CommittedOffset{
		{Topic: "raw", Partition: 0}: {Offset: 7, Generation: 2, Metadata: lineage.OffsetMetadata(2)},
		{Topic: "raw", Partition: 1}: {Offset: 4, Generation: 1, Metadata: lineage.OffsetMetadata(1)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Committed = %v, want %v", got, want)
	}
	if len(asked) != 3 || len(asked[1]) != 1 || asked[1][0] != 0 {
		t.Fatalf("asked for %v: want both, then partition 0 alone until it settles", asked)
	}
}
