package devenv

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reaper gives the embedded broker the session expiry Kafka has.
//
// kfake arms a classic group member's session timer only when a reply
// (to JoinGroup or SyncGroup, or a heartbeat) reaches it. A member whose
// process was killed while its JoinGroup waited (a stage SIGKILLed within a
// second of starting) never receives its reply, so no timer is ever armed:
// kfake keeps the dead member until the rebalance timeout (60 s for
// franz-go and the Java client) or, once a live member completed the
// rebalance with it, for good — holding half the partitions, which nobody
// then processes. Kafka instead drops any member that sends nothing for
// its session timeout, whatever the group is doing.
//
// The reaper watches the broker's side of things from outside kfake: the
// classic group requests each member sends (through kfake's request
// controls, only observing), and the connections the broker accepts. A
// member whose connection has closed and that has sent nothing for its
// session timeout is dead; the reaper removes it with a LeaveGroup on its
// behalf, exactly what a member that stops cleanly sends, and the group
// rebalances at once. A live member is never removed: it heartbeats (every
// 3 s in franz-go) or waits in a JoinGroup on an open connection.
type reaper struct {
	c   *kfake.Cluster
	log *slog.Logger

	mu      sync.Mutex
	closed  map[string]time.Time // remote address → when its connection closed
	open    map[string]int       // remote address → open connections from it
	members map[memberKey]*memberSeen
}

type memberKey struct{ group, member string }

type memberSeen struct {
	last    time.Time     // its last request
	session time.Duration // from its JoinGroup
	host    string        // the address of the connection it joined on
}

func newReaper(log *slog.Logger) *reaper {
	return &reaper{log: log, closed: map[string]time.Time{}, open: map[string]int{}, members: map[memberKey]*memberSeen{}}
}

// listener wraps the broker's listener to see its connections close.
func (r *reaper) listener(ln net.Listener) net.Listener { return &reapedListener{Listener: ln, r: r} }

type reapedListener struct {
	net.Listener
	r *reaper
}

func (l *reapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	addr := c.RemoteAddr().String()
	l.r.mu.Lock()
	l.r.open[addr]++
	delete(l.r.closed, addr)
	l.r.mu.Unlock()
	return &reapedConn{Conn: c, r: l.r, addr: addr}, nil
}

type reapedConn struct {
	net.Conn
	r    *reaper
	addr string
	once sync.Once
}

func (c *reapedConn) Close() error {
	c.once.Do(func() {
		c.r.mu.Lock()
		if c.r.open[c.addr]--; c.r.open[c.addr] <= 0 {
			delete(c.r.open, c.addr)
			c.r.closed[c.addr] = time.Now()
		}
		c.r.mu.Unlock()
	})
	return c.Conn.Close()
}

// watch installs the observing controls on the cluster.
func (r *reaper) watch(c *kfake.Cluster) {
	r.c = c
	seen := func(group, member string, join *kmsg.JoinGroupRequest) {
		if member == "" {
			return // a first join: kfake times a member without an ID itself
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		k := memberKey{group, member}
		m := r.members[k]
		if m == nil {
			m = &memberSeen{session: 10 * time.Second}
			r.members[k] = m
		}
		m.last = time.Now()
		if join != nil {
			m.session = time.Duration(join.SessionTimeoutMillis) * time.Millisecond
		}
	}
	observe := func(key kmsg.Key, fn func(kmsg.Request)) {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			fn(req)
			return nil, nil, false
		})
	}
	observe(kmsg.JoinGroup, func(req kmsg.Request) {
		j := req.(*kmsg.JoinGroupRequest)
		seen(j.Group, j.MemberID, j)
	})
	observe(kmsg.SyncGroup, func(req kmsg.Request) {
		s := req.(*kmsg.SyncGroupRequest)
		seen(s.Group, s.MemberID, nil)
	})
	observe(kmsg.Heartbeat, func(req kmsg.Request) {
		h := req.(*kmsg.HeartbeatRequest)
		seen(h.Group, h.MemberID, nil)
	})
	observe(kmsg.OffsetCommit, func(req kmsg.Request) {
		o := req.(*kmsg.OffsetCommitRequest)
		seen(o.Group, o.MemberID, nil)
	})
	observe(kmsg.TxnOffsetCommit, func(req kmsg.Request) {
		o := req.(*kmsg.TxnOffsetCommitRequest)
		seen(o.Group, o.MemberID, nil)
	})
}

// run checks every interval until ctx ends, removing dead members through
// cl, a client of the embedded broker.
func (r *reaper) run(ctx context.Context, cl *kgo.Client, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sweep(ctx, cl)
		}
	}
}

// dead returns the members to remove now, and forgets members and
// addresses long gone.
func (r *reaper) dead(now time.Time) map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, at := range r.closed {
		if now.Sub(at) > 10*time.Minute {
			delete(r.closed, addr)
		}
	}
	byGroup := map[string][]memberKey{}
	for k := range r.members {
		byGroup[k.group] = append(byGroup[k.group], k)
	}
	r.mu.Unlock()
	// GroupInfo runs on the cluster's loop: not under r.mu, which the
	// controls on that loop take.
	infos := map[string]*kfake.GroupInfo{}
	for g := range byGroup {
		infos[g] = r.c.GroupInfo(g)
	}
	r.mu.Lock()
	out := map[string][]string{}
	for g, keys := range byGroup {
		current := map[string]string{} // member → client host
		if gi := infos[g]; gi != nil {
			for _, m := range gi.Members {
				current[m.MemberID] = m.ClientHost
			}
		}
		for _, k := range keys {
			m := r.members[k]
			host, ok := current[k.member]
			if !ok {
				if now.Sub(m.last) > time.Minute {
					delete(r.members, k) // left or removed
				}
				continue
			}
			m.host = host
			if r.open[host] > 0 {
				continue // its connection is open: alive, or waiting in a join
			}
			closedAt, ok := r.closed[host]
			if !ok || now.Sub(m.last) <= m.session || now.Sub(closedAt) <= 0 {
				continue
			}
			out[g] = append(out[g], k.member)
		}
	}
	return out
}

func (r *reaper) sweep(ctx context.Context, cl *kgo.Client) {
	for g, members := range r.dead(time.Now()) {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = g
		for _, id := range members {
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = id
			m.Reason = kmsg.StringPtr("session expired: its connection closed and it sent nothing for its session timeout (flecht dev)")
			req.Members = append(req.Members, m)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			r.log.Debug("removing dead group members failed; retrying", "group", g, "error", err)
			continue
		}
		for _, m := range resp.Members {
			r.log.Info("group member expired: its process is gone (connection closed, no request for its session timeout)",
				"group", g, "member_id", m.MemberID)
			r.mu.Lock()
			delete(r.members, memberKey{g, m.MemberID})
			r.mu.Unlock()
		}
	}
}
