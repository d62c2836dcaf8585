// Package mqtt is the MQTT→Kafka bridge (docs/contract.md §5): one persistent MQTT 5
// session per process, shared subscriptions reconciled against the active
// config records, and every message acknowledged to the MQTT broker only
// after the Kafka transaction that carries it has committed.
package mqtt

import (
	"errors"
	"fmt"
	"strings"
)

// ValidFilter checks an MQTT topic filter: non-empty, '#' only as the
// whole last level, '+' only as a whole level.
func ValidFilter(f string) error {
	if f == "" {
		return errors.New("empty topic filter")
	}
	if strings.HasPrefix(f, "$share/") {
		return fmt.Errorf("topic filter %q: give the plain filter; the bridge adds $share/<application_id>/ itself", f)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("topic filter %q: # must be the last level", f)
		case strings.Contains(l, "#") && l != "#":
			return fmt.Errorf("topic filter %q: # must be a whole level", f)
		case strings.Contains(l, "+") && l != "+":
			return fmt.Errorf("topic filter %q: + must be a whole level", f)
		}
	}
	return nil
}

// Match reports whether a topic name matches a filter. Topics beginning
// with $ are not matched by a filter starting with a wildcard (MQTT 4.7.2).
func Match(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) {
			return false
		}
		if f != "+" && f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}

// Overlap reports whether some topic matches both filters: two configs
// declaring such filters would each receive every message in the overlap.
func Overlap(a, b string) bool {
	al, bl := strings.Split(a, "/"), strings.Split(b, "/")
	if dollarVsWildcard(al[0], bl[0]) || dollarVsWildcard(bl[0], al[0]) {
		return false
	}
	for i := 0; ; i++ {
		aDone, bDone := i >= len(al), i >= len(bl)
		switch {
		case aDone && bDone:
			return true
		case aDone:
			// "a/#" also matches "a": b may continue only with '#'.
			return bl[i] == "#"
		case bDone:
			return al[i] == "#"
		}
		x, y := al[i], bl[i]
		if x == "#" || y == "#" {
			return true
		}
		if x != "+" && y != "+" && x != y {
			return false
		}
	}
}

// dollarVsWildcard reports whether x is a literal $ level and y a wildcard:
// a wildcard at the first level never matches a topic beginning with $
// (MQTT 4.7.2), so two such filters share no topic.
func dollarVsWildcard(x, y string) bool {
	return strings.HasPrefix(x, "$") && (y == "+" || y == "#")
}
