// Package acl knows which Kafka ACLs a stage and the operators of a stage
// need, and whether the current principal has them.
//
// Plan computes the least set for a stage file and a role (Roles): the
// stage itself (`run`), a replay (`replay`), the read-only operator verbs
// (`operate`) and feeding a pipeline by hand (`feed`), from the names of
// docs/contract.md §1. Literal patterns name the raw, config, output and
// dead-letter topics, the group and the changelog; the one prefixed
// pattern is the transactional IDs `APP-`, whose number grows with the
// input partitions (and, for a bridge, is named by its client id).
//
// Check asks the cluster what the principal may do on each resource,
// without the right to list ACLs (Kafka's authorized operations on
// Metadata, DescribeGroups and DescribeCluster; a transactional ID by
// name) and says "unknown" where Kafka cannot tell (Need.Probe).
// Preflight is the same check as a refusal, for the verbs that change
// something: nothing changes unless all of it can.
package acl

import (
	"fmt"
	"slices"
	"strings"
)

// ResourceType is a Kafka resource type, spelled as Kafka's ResourceType
// enum in lower case (the JSON of a plan).
type ResourceType string

// The resource types flecht needs ACLs on.
const (
	Topic           ResourceType = "topic"
	Group           ResourceType = "group"
	TransactionalID ResourceType = "transactional_id"
	Cluster         ResourceType = "cluster"
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "kafka-cluster"

// PatternType is how an ACL's resource name matches.
type PatternType string

// Pattern types.
const (
	Literal  PatternType = "literal"
	Prefixed PatternType = "prefixed"
)

// Operation is a Kafka ACL operation, spelled as Kafka's AclOperation
// enum in lower case (describe_configs for DESCRIBE_CONFIGS).
type Operation string

// The operations flecht needs.
const (
	Read            Operation = "read"
	Write           Operation = "write"
	Create          Operation = "create"
	Delete          Operation = "delete"
	Alter           Operation = "alter"
	Describe        Operation = "describe"
	DescribeConfigs Operation = "describe_configs"
	AlterConfigs    Operation = "alter_configs"
	IdempotentWrite Operation = "idempotent_write"
)

// opOrder sorts operations the way the tables in docs/security.md list them.
var opOrder = []Operation{Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite}

// Title is the operation as kafka-acls.sh and Strimzi spell it
// (DescribeConfigs).
func (o Operation) Title() string {
	var b strings.Builder
	for _, w := range strings.Split(string(o), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// implies reports whether an ALLOW of o also allows op: Kafka implies
// Describe by Read, Write, Delete and Alter, and DescribeConfigs by
// AlterConfigs.
func (o Operation) implies(op Operation) bool {
	if o == op {
		return true
	}
	switch op {
	case Describe:
		return o == Read || o == Write || o == Delete || o == Alter
	case DescribeConfigs:
		return o == AlterConfigs
	}
	return false
}

// Resource is what an ACL applies to: a type, a name and how it matches.
type Resource struct {
	Type    ResourceType `json:"resource_type"`
	Name    string       `json:"resource_name"`
	Pattern PatternType  `json:"pattern_type"`
}

// String is the resource for people: `topic sensors.raw`, `transactional
// IDs prefixed sensors-count-`.
func (r Resource) String() string {
	what := map[ResourceType]string{Topic: "topic", Group: "group", TransactionalID: "transactional ID", Cluster: "the cluster"}[r.Type]
	if r.Type == Cluster {
		return what
	}
	if r.Pattern == Prefixed {
		return map[ResourceType]string{Topic: "topics", Group: "groups", TransactionalID: "transactional IDs"}[r.Type] + " prefixed " + r.Name
	}
	return what + " " + r.Name
}

// Need is one operation on one resource, and why flecht needs it.
type Need struct {
	Resource
	Operation Operation `json:"operation"`
	// Why says which step of the role needs it.
	Why string `json:"why"`
}

// String is the need for people: `Write on topic sensors.refined`.
func (n Need) String() string { return n.Operation.Title() + " on " + n.Resource.String() }

// ACL is one ALLOW entry for a principal: the JSON of `flecht acl plan`
// (docs/security.md), names spelled as Kafka spells them.
type ACL struct {
	Principal    string       `json:"principal"`
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Operation    Operation    `json:"operation"`
	Permission   string       `json:"permission"`
	Host         string       `json:"host"`
}

// Resource is the ACL's resource.
func (a ACL) Resource() Resource {
	return Resource{Type: a.ResourceType, Name: a.ResourceName, Pattern: a.PatternType}
}

// ACLs turns needs into the ALLOW entries of principal, one per resource
// and operation, an operation another of the same resource implies left
// out, in a stable order.
func ACLs(principal string, needs []Need) []ACL {
	byRes := map[Resource][]Operation{}
	var order []Resource
	for _, n := range needs {
		if _, ok := byRes[n.Resource]; !ok {
			order = append(order, n.Resource)
		}
		if !slices.Contains(byRes[n.Resource], n.Operation) {
			byRes[n.Resource] = append(byRes[n.Resource], n.Operation)
		}
	}
	out := []ACL{}
	for _, r := range order {
		ops := byRes[r]
		for _, op := range opOrder {
			if !slices.Contains(ops, op) || impliedByOther(ops, op) {
				continue
			}
			out = append(out, ACL{Principal: principal, ResourceType: r.Type, ResourceName: r.Name, PatternType: r.Pattern, Operation: op, Permission: "allow", Host: "*"})
		}
	}
	return out
}

func impliedByOther(ops []Operation, op Operation) bool {
	for _, o := range ops {
		if o != op && o.implies(op) {
			return true
		}
	}
	return false
}

// CheckPrincipal refuses a principal that is not TYPE:NAME (User:alice,
// User:CN=alice): kafka-acls.sh and the authorizer take nothing else.
func CheckPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || strings.TrimSpace(name) == "" || strings.ContainsAny(p, "\n\r\t\x00") {
		return fmt.Errorf("principal %q: give it as Kafka writes it, TYPE:NAME (User:alice, or User:CN=alice for a client certificate)", p)
	}
	return nil
}
