package devenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startKafka runs a one-broker kfake cluster on the already bound ln.
//
// kfake always listens on 127.0.0.1 (its newListener formats
// "127.0.0.1:<port>", the port coming from kfake.Ports or 0); kfake.ListenFn
// replaces the net.Listen it calls, which is how we hand it ln. Binding
// ourselves lets Start check both ports before starting either broker.
//
// What kfake does and does not model, as found by kafka_test.go:
//   - transactions with read_committed, TxnOffsetCommit through a group
//     transact session, DeleteRecords, DescribeConfigs, ListOffsets,
//     ListTransactions and DescribeTransactions all work;
//   - transaction.max.timeout.ms (15 min) is enforced: a longer timeout
//     fails InitProducerID with INVALID_TRANSACTION_TIMEOUT, and the broker
//     aborts a transaction that outlives its timeout, as Kafka does;
//   - ListTransactions/DescribeTransactions report only Ongoing or Empty,
//     never Prepare* or Complete*: kfake ends transactions synchronously;
//   - min.insync.replicas is stored and described but never enforced
//     (acks=all succeeds with min.insync.replicas=2), and a replication
//     factor above 1 fails with INVALID_REPLICATION_FACTOR on one broker;
//   - compaction runs every log.cleaner.backoff.ms (an hour by default);
//   - WriteTxnMarkers, delegation tokens, tiered storage are missing (see
//     kfake's skipped_features file);
//   - a classic group member whose process dies while its JoinGroup waits
//     is never timed out (no reply reaches it, so no session timer is
//     armed): reaper.go expires such members as Kafka would.
func startKafka(ln net.Listener, opts Options, logger *slog.Logger) (*kfake.Cluster, error) {
	parts := opts.DefaultPartitions
	if parts == 0 {
		parts = 1
	}
	var once sync.Once
	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(string, string) (net.Listener, error) {
			handed := false
			once.Do(func() { handed = true })
			if !handed {
				return nil, errors.New("devenv: kfake asked for a second listener")
			}
			return ln, nil
		}),
		kfake.ClusterID("flecht-dev"),
		kfake.DefaultNumPartitions(parts),
		kfake.WithLogger(kfakeLogger{logger}),
		// Describe what this broker really does: one broker can only hold
		// one replica, so tools that read the default should see 1.
		kfake.BrokerConfigs(map[string]string{"default.replication.factor": "1"}),
	}
	if opts.AutoCreateTopics {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	if opts.DataDir != "" {
		kopts = append(kopts, kfake.DataDir(opts.DataDir))
	}
	for _, t := range opts.Topics {
		kopts = append(kopts, kfake.SeedTopics(t.Partitions, t.Name))
	}
	return kfake.NewCluster(kopts...)
}

// kfakeLogger routes kfake's logs to slog (gated in log.go, which turns
// kfake's Info chatter about requests and group members into Debug).
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	default:
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !k.l.Enabled(ctx, lvl) {
		return // skip the Sprintf: kfake logs on hot paths
	}
	k.l.Log(ctx, lvl, fmt.Sprintf(format, args...))
}
