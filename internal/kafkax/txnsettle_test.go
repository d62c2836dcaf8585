package kafkax

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// settleFake is a kfake cluster whose DescribeTransactions answers come
// from states, one per request (the last one repeats); it counts them.
func settleFake(t *testing.T, states ...int16) (*kgo.Client, *atomic.Int32) {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var asked atomic.Int32
	c.ControlKey(int16(kmsg.DescribeTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		i := int(asked.Add(1)) - 1
		code := states[min(i, len(states)-1)]
		resp := req.(*kmsg.DescribeTransactionsRequest).ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = "app-0"
		switch code {
		case prepare:
			st.State = "PrepareCommit"
		case complete:
			st.State = "CompleteCommit"
		default:
			st.ErrorCode = code
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	})
	cl := mustClient(t, &Cluster{Brokers: c.ListenAddrs()})
	return cl, &asked
}

// Pseudo error codes for settleFake: a state instead of an error.
const (
	prepare  int16 = -100
	complete int16 = -101
)

func TestSettleWaitsForTheCoordinatorToCompleteTheTransaction(t *testing.T) {
	cl, asked := settleFake(t, prepare, prepare, prepare, complete)
	s := NewTxnSettler(cl, "app-0")
	s.Settle(ctxT(t))
	if n := asked.Load(); n != 0 {
		t.Fatalf("no transaction ended, yet Settle asked %d times", n)
	}
	s.Ended()
	s.Settle(ctxT(t))
	if n := asked.Load(); n != 4 {
		t.Fatalf("asked %d times; want 4 (three answers PrepareCommit, then CompleteCommit)", n)
	}
	s.Settle(ctxT(t))
	if n := asked.Load(); n != 4 {
		t.Fatalf("a second Settle for the same end asked again (%d)", n)
	}
}

func TestSettleTurnsItselfOffWhenTheBrokerRefuses(t *testing.T) {
	cl, asked := settleFake(t, kerr.TransactionalIDAuthorizationFailed.Code)
	s := NewTxnSettler(cl, "app-0")
	s.Ended()
	s.Settle(ctxT(t))
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times; want 1", n)
	}
	s.Ended()
	s.Settle(ctxT(t))
	if n := asked.Load(); n != 1 {
		t.Fatalf("a refused settler asked again (%d times in all)", n)
	}
}

func TestSettleDoesNotTurnOffOnAPassingError(t *testing.T) {
	cl, asked := settleFake(t, kerr.CoordinatorLoadInProgress.Code, complete)
	s := NewTxnSettler(cl, "app-0")
	s.Ended()
	s.Settle(ctxT(t))
	s.Ended()
	s.Settle(ctxT(t))
	if n := asked.Load(); n < 2 {
		t.Fatalf("asked %d times; a passing error must not turn the settler off", n)
	}
}
