package acl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Status is what a check could prove about one need.
type Status string

// The statuses of a need.
const (
	Granted Status = "granted"
	Missing Status = "missing"
	// Unknown: Kafka does not tell (a topic that does not exist yet has
	// no authorized operations); Reason says why.
	Unknown Status = "unknown"
)

// Result is one need as the cluster answered for the current principal.
type Result struct {
	Need
	Status Status `json:"status"`
	// Authorized is true or false when proven, null when unknown.
	Authorized *bool  `json:"authorized"`
	Reason     string `json:"reason,omitempty"`
	// Probed names the resources asked for a prefixed need.
	Probed []string `json:"probed,omitempty"`
}

// Probe asks the cluster, as the client's principal, whether it may do
// each need, without the right to list ACLs:
//
//   - a topic: Metadata with its authorized operations; one that does not
//     exist proves Describe by UNKNOWN_TOPIC_OR_PARTITION, Create by a
//     validate-only CreateTopics and DescribeConfigs by DescribeConfigs,
//     and leaves Read, Write and Delete unknown;
//   - a group: DescribeGroups with its authorized operations (Kafka gives
//     them for a group that does not exist too);
//   - the cluster: DescribeCluster with its authorized operations;
//   - a transactional ID: Describe by DescribeTransactions, Write by an
//     EndTxn for a producer ID no producer has (the broker checks Write
//     first and then answers INVALID_PRODUCER_ID_MAPPING: nothing
//     changes). A prefixed need is probed on names, one per task
//     (names[prefix]); without names it is unknown.
//
// A prefixed topic or group need is unknown: Kafka answers for names.
func Probe(ctx context.Context, cl *kgo.Client, needs []Need, names map[string][]string) ([]Result, error) {
	var topics, groups []string
	var txns []string
	cluster := false
	for _, n := range needs {
		switch {
		case n.Type == Topic && n.Pattern == Literal:
			topics = appendNew(topics, n.Name)
		case n.Type == Group && n.Pattern == Literal:
			groups = appendNew(groups, n.Name)
		case n.Type == Cluster:
			cluster = true
		case n.Type == TransactionalID && n.Pattern == Literal:
			txns = appendNew(txns, n.Name)
		case n.Type == TransactionalID:
			for _, id := range names[n.Name] {
				txns = appendNew(txns, id)
			}
		}
	}
	ans := answers{}
	if err := ans.topics(ctx, cl, topics, needs); err != nil {
		return nil, err
	}
	if err := ans.groups(ctx, cl, groups); err != nil {
		return nil, err
	}
	if cluster {
		if err := ans.cluster(ctx, cl); err != nil {
			return nil, err
		}
	}
	if err := ans.txns(ctx, cl, txns, needs); err != nil {
		return nil, err
	}

	out := make([]Result, 0, len(needs))
	for _, n := range needs {
		r := Result{Need: n}
		switch {
		case n.Pattern == Prefixed && n.Type != TransactionalID:
			r.Status, r.Reason = Unknown, "Kafka reports the operations of named resources only, not of a prefix"
		case n.Pattern == Prefixed:
			ids := names[n.Name]
			if len(ids) == 0 {
				r.Status, r.Reason = Unknown, "no transactional ID of the stage is known to probe"
				break
			}
			r.Probed = ids
			r.Status = Granted
			for _, id := range ids {
				a := ans.get(Resource{Type: TransactionalID, Name: id, Pattern: Literal}, n.Operation)
				if a.status != Granted {
					r.Status, r.Reason = a.status, a.reason
					if a.status == Missing {
						break
					}
				}
			}
		default:
			a := ans.get(n.Resource, n.Operation)
			r.Status, r.Reason = a.status, a.reason
		}
		if r.Status != Unknown {
			ok := r.Status == Granted
			r.Authorized = &ok
		}
		out = append(out, r)
	}
	return out, nil
}

func appendNew(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

type answer struct {
	status Status
	reason string
}

type answerKey struct {
	r  Resource
	op Operation
}

// answers holds what the cluster said, by resource and operation; a
// resource whose operations are all known holds them in ops.
type answers struct {
	ops  map[Resource]map[Operation]bool
	one  map[answerKey]answer
	none map[Resource]string // nothing known of the resource: why
}

func (a *answers) setOps(r Resource, bits int32, known []Operation) {
	if a.ops == nil {
		a.ops = map[Resource]map[Operation]bool{}
	}
	m := map[Operation]bool{}
	for _, op := range known {
		code, ok := opCode(op)
		m[op] = ok && bits&(1<<int32(code)) != 0
	}
	a.ops[r] = m
}

func (a *answers) set(r Resource, op Operation, ans answer) {
	if a.one == nil {
		a.one = map[answerKey]answer{}
	}
	a.one[answerKey{r, op}] = ans
}

func (a *answers) unknown(r Resource, why string) {
	if a.none == nil {
		a.none = map[Resource]string{}
	}
	a.none[r] = why
}

func (a *answers) get(r Resource, op Operation) answer {
	if ans, ok := a.one[answerKey{r, op}]; ok {
		return ans
	}
	if m, ok := a.ops[r]; ok {
		if granted, ok := m[op]; ok {
			if granted {
				return answer{status: Granted}
			}
			return answer{status: Missing}
		}
	}
	if why, ok := a.none[r]; ok {
		return answer{status: Unknown, reason: why}
	}
	return answer{status: Unknown, reason: "not probed"}
}

var topicOps = []Operation{Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs}
var groupOps = []Operation{Read, Delete, Describe}
var clusterOps = []Operation{Create, Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite}

func opCode(op Operation) (kmsg.ACLOperation, bool) {
	switch op {
	case Read:
		return kmsg.ACLOperationRead, true
	case Write:
		return kmsg.ACLOperationWrite, true
	case Create:
		return kmsg.ACLOperationCreate, true
	case Delete:
		return kmsg.ACLOperationDelete, true
	case Alter:
		return kmsg.ACLOperationAlter, true
	case Describe:
		return kmsg.ACLOperationDescribe, true
	case DescribeConfigs:
		return kmsg.ACLOperationDescribeConfigs, true
	case AlterConfigs:
		return kmsg.ACLOperationAlterConfigs, true
	case IdempotentWrite:
		return kmsg.ACLOperationIdempotentWrite, true
	}
	return 0, false
}

// notReported is the authorized-operations value of a broker that did not
// compute them (Kafka's Integer.MIN_VALUE).
const notReported = math.MinInt32

func (a *answers) topics(ctx context.Context, cl *kgo.Client, topics []string, needs []Need) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("asking for the authorized operations of topics: %w", err)
	}
	var absent []string
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		r := Resource{Type: Topic, Name: *t.Topic, Pattern: Literal}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			// No Describe, so none of the operations that imply it.
			a.setOps(r, 0, []Operation{Read, Write, Delete, Alter, Describe})
			absent = append(absent, *t.Topic) // Create, DescribeConfigs stand alone
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			a.set(r, Describe, answer{status: Granted})
			a.unknown(r, "the topic does not exist yet: Kafka reports the operations on a topic once it exists")
			absent = append(absent, *t.Topic)
		case err != nil:
			a.unknown(r, fmt.Sprintf("describing the topic: %v", err))
		case t.AuthorizedOperations == notReported:
			a.unknown(r, "the broker does not report authorized operations (Kafka 2.3 or later does)")
		default:
			a.setOps(r, t.AuthorizedOperations, topicOps)
		}
	}
	var create, configs []string
	for _, t := range absent {
		for _, n := range needs {
			if n.Type != Topic || n.Pattern != Literal || n.Name != t {
				continue
			}
			switch n.Operation {
			case Create:
				create = appendNew(create, t)
			case DescribeConfigs:
				configs = appendNew(configs, t)
			}
		}
	}
	if err := a.probeCreate(ctx, cl, create); err != nil {
		return err
	}
	return a.probeConfigs(ctx, cl, configs)
}

// probeCreate asks a validate-only CreateTopics: the broker checks Create
// (on the topic or the cluster) and creates nothing.
func (a *answers) probeCreate(ctx context.Context, cl *kgo.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.TimeoutMillis = 15000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t, -1, -1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("probing Create on topics: %w", err)
	}
	for _, t := range resp.Topics {
		r := Resource{Type: Topic, Name: t.Topic, Pattern: Literal}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			a.set(r, Create, answer{status: Missing})
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			a.set(r, Create, answer{status: Granted})
		default:
			a.set(r, Create, answer{status: Unknown, reason: fmt.Sprintf("a validate-only create answered %v", err)})
		}
	}
	return nil
}

// probeConfigs asks DescribeConfigs: Kafka checks DescribeConfigs before
// it looks the topic up.
func (a *answers) probeConfigs(ctx context.Context, cl *kgo.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, t
		rr.ConfigNames = []string{"cleanup.policy"}
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("probing DescribeConfigs on topics: %w", err)
	}
	for _, rr := range resp.Resources {
		r := Resource{Type: Topic, Name: rr.ResourceName, Pattern: Literal}
		switch err := kerr.ErrorForCode(rr.ErrorCode); {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			a.set(r, DescribeConfigs, answer{status: Missing})
		case err == nil, errors.Is(err, kerr.UnknownTopicOrPartition):
			a.set(r, DescribeConfigs, answer{status: Granted})
		default:
			a.set(r, DescribeConfigs, answer{status: Unknown, reason: fmt.Sprintf("DescribeConfigs answered %v", err)})
		}
	}
	return nil
}

func (a *answers) groups(ctx context.Context, cl *kgo.Client, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	req.IncludeAuthorizedOperations = true
	shards := cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			if errors.Is(sh.Err, kerr.GroupAuthorizationFailed) {
				for _, g := range groups {
					a.setOps(Resource{Type: Group, Name: g, Pattern: Literal}, 0, groupOps)
				}
				continue
			}
			return fmt.Errorf("asking for the authorized operations of group %s: %w", groups[0], sh.Err)
		}
		resp := sh.Resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range resp.Groups {
			r := Resource{Type: Group, Name: g.Group, Pattern: Literal}
			switch err := kerr.ErrorForCode(g.ErrorCode); {
			case errors.Is(err, kerr.GroupAuthorizationFailed):
				a.setOps(r, 0, groupOps)
			case err != nil && !errors.Is(err, kerr.GroupIDNotFound):
				a.unknown(r, fmt.Sprintf("describing the group: %v", err))
			case g.AuthorizedOperations == notReported:
				a.unknown(r, "the broker does not report authorized operations (Kafka 2.3 or later does)")
			default:
				a.setOps(r, g.AuthorizedOperations, groupOps)
			}
		}
	}
	return nil
}

func (a *answers) cluster(ctx context.Context, cl *kgo.Client) error {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	r := Resource{Type: Cluster, Name: ClusterName, Pattern: Literal}
	switch {
	case err != nil:
		return fmt.Errorf("asking for the authorized operations on the cluster: %w", err)
	case resp.ErrorCode != 0:
		a.unknown(r, fmt.Sprintf("describing the cluster: %v", kerr.ErrorForCode(resp.ErrorCode)))
	case resp.ClusterAuthorizedOperations == notReported:
		a.unknown(r, "the broker does not report authorized operations")
	default:
		// Kafka reports 0 to a principal without Describe on the cluster.
		a.setOps(r, resp.ClusterAuthorizedOperations, clusterOps)
	}
	return nil
}

// probeProducerID is a producer ID no producer has: an EndTxn for it
// passes the Write check and then fails with INVALID_PRODUCER_ID_MAPPING.
const probeProducerID = math.MaxInt64

func (a *answers) txns(ctx context.Context, cl *kgo.Client, ids []string, needs []Need) error {
	if len(ids) == 0 {
		return nil
	}
	wantWrite := false
	for _, n := range needs {
		if n.Type == TransactionalID && n.Operation == Write {
			wantWrite = true
		}
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	shards := cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			if !errors.Is(sh.Err, kerr.TransactionalIDAuthorizationFailed) {
				return fmt.Errorf("describing transactional IDs: %w", sh.Err)
			}
			continue // the IDs of this shard stay unanswered: below
		}
		for _, st := range sh.Resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			r := Resource{Type: TransactionalID, Name: st.TransactionalID, Pattern: Literal}
			switch err := kerr.ErrorForCode(st.ErrorCode); {
			case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
				a.set(r, Describe, answer{status: Missing})
				a.set(r, Write, answer{status: Missing})
			case err == nil, errors.Is(err, kerr.TransactionalIDNotFound):
				a.set(r, Describe, answer{status: Granted})
			default:
				a.set(r, Describe, answer{status: Unknown, reason: fmt.Sprintf("describing it: %v", err)})
			}
		}
	}
	for _, id := range ids {
		r := Resource{Type: TransactionalID, Name: id, Pattern: Literal}
		if _, ok := a.one[answerKey{r, Describe}]; !ok {
			a.set(r, Describe, answer{status: Missing})
			a.set(r, Write, answer{status: Missing})
		}
		if !wantWrite {
			continue
		}
		if d := a.one[answerKey{r, Write}]; d.status == Missing {
			continue
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, probeProducerID, 0, false
		resp, err := end.RequestWith(ctx, cl)
		switch {
		case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
			a.set(r, Write, answer{status: Missing})
		case err != nil:
			a.set(r, Write, answer{status: Unknown, reason: fmt.Sprintf("probing Write: %v", err)})
		default:
			switch err := kerr.ErrorForCode(resp.ErrorCode); {
			case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
				a.set(r, Write, answer{status: Missing})
			case errors.Is(err, kerr.InvalidProducerIDMapping), errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
				a.set(r, Write, answer{status: Granted})
			default:
				a.set(r, Write, answer{status: Unknown, reason: fmt.Sprintf("probing Write answered %v", err)})
			}
		}
	}
	return nil
}

// Undescribable returns the transactional IDs of ids the principal may not
// describe. Kafka leaves those out of ListTransactions without a word, so
// whoever lists open transactions must say they are unknown, not none.
func Undescribable(ctx context.Context, cl *kgo.Client, ids []string) ([]string, error) {
	a := answers{}
	if err := a.txns(ctx, cl, ids, nil); err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if a.get(Resource{Type: TransactionalID, Name: id, Pattern: Literal}, Describe).status == Missing {
			out = append(out, id)
		}
	}
	return out, nil
}
