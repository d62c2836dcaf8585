package kafkax_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// DescribeGroup sees a missing group as Dead, and live members with their
// assignments under both rebalance protocols.
func TestDescribeGroup(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "in", 4, nil); err != nil {
		t.Fatal(err)
	}

	g, err := kafkax.DescribeGroup(ctx, adm, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if g.Exists() || g.State != kafkax.GroupStateDead || g.Members == nil || len(g.Members) != 0 {
		t.Fatalf("missing group: %+v", g)
	}

	for _, tc := range []struct {
		protocol string
		opts     []kgo.Opt
	}{
		{"classic", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"consumer", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			group := "g-" + tc.protocol
			member := devenvtest.KafkaClient(t, env, append(tc.opts, kgo.ClientID("worker-1"), kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"))...)
			go func() {
				for ctx.Err() == nil {
					if member.PollFetches(ctx).IsClientClosed() {
						return
					}
				}
			}()
			deadline := time.Now().Add(30 * time.Second)
			for {
				g, err := kafkax.DescribeGroup(ctx, adm, group)
				if err != nil {
					t.Fatal(err)
				}
				if len(g.Members) == 1 && len(g.Members[0].Assigned) == 1 && len(g.Members[0].Assigned[0].Partitions) == 4 {
					m := g.Members[0]
					// kfake answers ConsumerGroupDescribe with topic IDs
					// only (Kafka adds the names), so the name is checked
					// for the classic protocol here and for both in e2e.
					wantTopic := "in"
					if tc.protocol == "consumer" {
						wantTopic = m.Assigned[0].Topic
					}
					if g.Protocol != tc.protocol || m.ClientID != "worker-1" || m.Host == "" || !g.Exists() ||
						fmt.Sprint(m.Assigned[0].Partitions) != "[0 1 2 3]" || m.Assigned[0].Topic != wantTopic {
						t.Fatalf("group %+v", g)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("never saw the member assigned: %+v", g)
				}
				time.Sleep(50 * time.Millisecond)
			}
			member.Close()
			for deadline := time.Now().Add(30 * time.Second); ; {
				g, err := kafkax.DescribeGroup(ctx, adm, group)
				if err != nil {
					t.Fatal(err)
				}
				if len(g.Members) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("member did not leave: %+v", g)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
