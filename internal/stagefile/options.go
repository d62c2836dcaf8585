package stagefile

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/suggest"

	"go.yaml.in/yaml/v3"
)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// unknownKeys rejects mapping keys that name no field of t, wherever the
// node maps onto a struct. yaml.v3 checks known fields only when decoding
// from bytes, and a node decoded from bytes again would carry the lines of
// its re-rendering; checking the node itself keeps the stage file's lines.
func unknownKeys(n *yaml.Node, t reflect.Type) error { return checkKeys(n, t, "option") }

// checkKeys is unknownKeys calling an unknown key a what ("option",
// "field").
func checkKeys(n *yaml.Node, t reflect.Type, what string) error {
	t = indirect(t)
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decodes itself
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		return unknownStructKeys(n, t, what)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for _, item := range n.Content {
			if err := checkKeys(item, t.Elem(), what); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i], t.Elem(), what); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownStructKeys(n *yaml.Node, t reflect.Type, what string) error {
	fields, open := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		switch {
		case ok:
			if err := checkKeys(v, ft, what); err != nil {
				return err
			}
		case !open:
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			sort.Strings(names)
			hint := ""
			if near := suggest.Nearest(k.Value, names); len(near) > 0 {
				hint = "did you mean " + strings.Join(near, " or ") + "? "
			}
			return fmt.Errorf("line %d: unknown %s %s (%sknown: %s)", k.Line, what, boundedread.Quote(k.Value), hint, strings.Join(names, ", "))
		}
	}
	return nil
}

// yamlFields maps the keys yaml.v3 decodes into t to their types; open is
// true when an inline map takes any other key.
func yamlFields(t reflect.Type) (fields map[string]reflect.Type, open bool) {
	fields = map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, flags, _ := strings.Cut(tag, ",")
		if strings.Contains(","+flags+",", ",inline,") {
			switch ft := f.Type; ft.Kind() {
			case reflect.Map:
				open = true
			case reflect.Struct, reflect.Pointer:
				inner, innerOpen := yamlFields(indirect(ft))
				for k, v := range inner {
					fields[k] = v
				}
				open = open || innerOpen
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, open
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// noOptions refuses every key, naming its line, for a builtin whose options
// struct has no fields: listing "known: " with nothing after it would read
// as a bug.
func noOptions(builtin string, n *yaml.Node, t reflect.Type) error {
	t = indirect(t)
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	if fields, open := yamlFields(t); len(fields) > 0 || open {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, fmt.Sprintf("%s (line %d)", boundedread.Quote(n.Content[i].Value), n.Content[i].Line))
	}
	return fmt.Errorf("builtin %s takes no options in the stage file; remove %s", boundedread.Quote(builtin), strings.Join(keys, ", "))
}
