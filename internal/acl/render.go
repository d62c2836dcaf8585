package acl

import (
	"strings"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Command is the kafka-acls.sh command that grants principal the
// operations on r. bootstrap and commandConfig fill --bootstrap-server and
// --command-config ("" leaves a placeholder, and no --command-config).
func Command(principal string, r Resource, ops []Operation, bootstrap, commandConfig string) string {
	if bootstrap == "" {
		bootstrap = "BROKER:9092"
	}
	args := []string{"kafka-acls.sh", "--bootstrap-server", textfmt.ShellQuote(bootstrap)}
	if commandConfig != "" {
		args = append(args, "--command-config", textfmt.ShellQuote(commandConfig))
	}
	args = append(args, "--add", "--allow-principal", textfmt.ShellQuote(principal))
	for _, op := range ops {
		args = append(args, "--operation", op.Title())
	}
	switch r.Type {
	case Topic:
		args = append(args, "--topic", textfmt.ShellQuote(r.Name))
	case Group:
		args = append(args, "--group", textfmt.ShellQuote(r.Name))
	case TransactionalID:
		args = append(args, "--transactional-id", textfmt.ShellQuote(r.Name))
	case Cluster:
		args = append(args, "--cluster")
	}
	if r.Pattern == Prefixed {
		args = append(args, "--resource-pattern-type", "prefixed")
	}
	return strings.Join(args, " ")
}

// Grant is one kafka-acls.sh command: the operations of one resource.
type Grant struct {
	Resource   Resource
	Operations []Operation
	Command    string
}

// Commands groups acls by resource (in their order) into the kafka-acls.sh
// commands that grant them.
func Commands(acls []ACL, bootstrap, commandConfig string) []Grant {
	var out []Grant
	at := map[[2]string]int{}
	for _, a := range acls {
		k := [2]string{a.Principal, string(a.ResourceType) + "\x00" + a.ResourceName + "\x00" + string(a.PatternType)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Grant{Resource: a.Resource()})
		}
		out[i].Operations = append(out[i].Operations, a.Operation)
	}
	for i := range out {
		out[i].Command = Command(acls[0].Principal, out[i].Resource, out[i].Operations, bootstrap, commandConfig)
	}
	return out
}

// KafkaUser is a Strimzi KafkaUser holding the plan's ACLs
// (spec.authorization.acls, type simple).
type KafkaUser struct {
	APIVersion string            `json:"apiVersion" yaml:"apiVersion"`
	Kind       string            `json:"kind" yaml:"kind"`
	Metadata   KafkaUserMetadata `json:"metadata" yaml:"metadata"`
	Spec       KafkaUserSpec     `json:"spec" yaml:"spec"`
}

// KafkaUserMetadata names the KafkaUser.
type KafkaUserMetadata struct {
	Name string `json:"name" yaml:"name"`
}

// KafkaUserSpec holds the authorization.
type KafkaUserSpec struct {
	Authorization StrimziAuthorization `json:"authorization" yaml:"authorization"`
}

// StrimziAuthorization is spec.authorization.
type StrimziAuthorization struct {
	Type string       `json:"type" yaml:"type"`
	ACLs []StrimziACL `json:"acls" yaml:"acls"`
}

// StrimziACL is one entry of spec.authorization.acls.
type StrimziACL struct {
	Resource   StrimziResource `json:"resource" yaml:"resource"`
	Operations []string        `json:"operations" yaml:"operations"`
	Host       string          `json:"host" yaml:"host"`
}

// StrimziResource is Strimzi's resource: type topic, group,
// transactionalId or cluster; patternType literal or prefix.
type StrimziResource struct {
	Type        string `json:"type" yaml:"type"`
	Name        string `json:"name,omitempty" yaml:"name,omitempty"`
	PatternType string `json:"patternType,omitempty" yaml:"patternType,omitempty"`
}

// Strimzi is the plan as a Strimzi KafkaUser named after the principal
// (User:alice is alice, User:CN=alice is CN=alice as Strimzi's TLS users
// are named).
func Strimzi(p *Plan) KafkaUser {
	_, name, _ := strings.Cut(p.Principal, ":")
	u := KafkaUser{APIVersion: "kafka.strimzi.io/v1beta2", Kind: "KafkaUser", Metadata: KafkaUserMetadata{Name: strings.TrimPrefix(name, "CN=")}}
	u.Spec.Authorization = StrimziAuthorization{Type: "simple", ACLs: []StrimziACL{}}
	for _, g := range Commands(p.ACLs, "", "") {
		r := StrimziResource{Type: string(g.Resource.Type)}
		if g.Resource.Type == TransactionalID {
			r.Type = "transactionalId"
		}
		if g.Resource.Type != Cluster {
			r.Name, r.PatternType = g.Resource.Name, "literal"
			if g.Resource.Pattern == Prefixed {
				r.PatternType = "prefix"
			}
		}
		acl := StrimziACL{Resource: r, Host: "*"}
		for _, op := range g.Operations {
			acl.Operations = append(acl.Operations, op.Title())
		}
		u.Spec.Authorization.ACLs = append(u.Spec.Authorization.ACLs, acl)
	}
	return u
}
