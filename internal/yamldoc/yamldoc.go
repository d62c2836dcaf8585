// Package yamldoc holds the one rule flecht's YAML files share: a file
// holds one document. A decoder reads the first; whatever follows a ---
// would be ignored, so a stage or a profile pasted after it must not pass
// for one that is read.
package yamldoc

import (
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// SecondDocument reads what dec holds after its first document and
// returns the line of the --- that starts a second one with content, 0
// when there
// is none. An empty document (a trailing ---) holds nothing to ignore.
func SecondDocument(dec *yaml.Decoder) (int, error) {
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if !empty(&next) {
			return next.Line, nil
		}
	}
}

func empty(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	c := doc.Content[0]
	return c.Kind == yaml.ScalarNode && c.Tag == "!!null" && c.Value == ""
}
