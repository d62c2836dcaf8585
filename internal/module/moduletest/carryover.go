package moduletest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Carryover builds the carryover test module: for each record it writes
// what a module could carry from one record to the next (map order,
// math/rand's global generators, the monotonic clock, sleeps, a counter, a
// growing map), with the input's key, value, partition and offset.
func Carryover(t testing.TB) string {
	t.Helper()
	return Build(t, filepath.Join(Root(), "internal", "module", "testdata", "modules"), "./carryover")
}

// CarryoverDiff compares two runs' outputs of the carryover module over
// one input, input record by input record (each output names its input's
// partition and offset); the outputs may come in any order. It returns ""
// when every input has exactly one output in each run with the same bytes,
// and otherwise says how many records differ, which fields how often, and
// shows the first.
func CarryoverDiff(aName string, a [][]byte, bName string, b [][]byte) string {
	ia, problems := indexByInput(aName, a)
	ib, more := indexByInput(bName, b)
	problems = append(problems, more...)
	var differ []inputAt
	fields := map[string]int{}
	for at, va := range ia {
		vb, ok := ib[at]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no output for %s", bName, at))
			continue
		}
		if !bytes.Equal(va, vb) {
			differ = append(differ, at)
			for _, f := range differentFields(va, vb) {
				fields[f]++
			}
		}
	}
	for at := range ib {
		if _, ok := ia[at]; !ok {
			problems = append(problems, fmt.Sprintf("%s has no output for %s", aName, at))
		}
	}
	if len(differ) == 0 && len(problems) == 0 {
		return ""
	}
	var s strings.Builder
	if len(differ) > 0 {
		slices.SortFunc(differ, inputAt.compare)
		first := differ[0]
		fmt.Fprintf(&s, "%d of %d records differ between %s and %s (by field: %s); the first, %s:\n  %s: %s\n  %s: %s",
			len(differ), len(ia), aName, bName, fieldCounts(fields), first, aName, ia[first], bName, ib[first])
	}
	slices.Sort(problems)
	if len(problems) > 0 {
		if s.Len() > 0 {
			s.WriteString("\n")
		}
		fmt.Fprintf(&s, "%d outputs missing or repeated; the first: %s", len(problems), problems[0])
	}
	return s.String()
}

// inputAt is the input record an output answers.
type inputAt struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

func (at inputAt) String() string {
	return fmt.Sprintf("partition %d offset %d", at.Partition, at.Offset)
}

func (at inputAt) compare(o inputAt) int {
	if c := cmp.Compare(at.Partition, o.Partition); c != 0 {
		return c
	}
	return cmp.Compare(at.Offset, o.Offset)
}

func indexByInput(name string, outs [][]byte) (map[inputAt][]byte, []string) {
	idx := map[inputAt][]byte{}
	var problems []string
	for _, v := range outs {
		var at inputAt
		if err := json.Unmarshal(v, &at); err != nil {
			problems = append(problems, fmt.Sprintf("%s wrote %q, not the carryover module's output: %v", name, v, err))
			continue
		}
		if _, dup := idx[at]; dup {
			problems = append(problems, fmt.Sprintf("%s has two outputs for %s", name, at))
			continue
		}
		idx[at] = v
	}
	return idx, problems
}

// differentFields names the top-level fields whose values differ.
func differentFields(a, b []byte) []string {
	var fa, fb map[string]json.RawMessage
	if json.Unmarshal(a, &fa) != nil || json.Unmarshal(b, &fb) != nil {
		return []string{"(not JSON objects)"}
	}
	var out []string
	for k, v := range fa {
		if !bytes.Equal(v, fb[k]) {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func fieldCounts(fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int {
		if c := cmp.Compare(fields[y], fields[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, fields[k])
	}
	return strings.Join(parts, ", ")
}
