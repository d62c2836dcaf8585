package stagefile

import (
	"errors"
	"strings"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// CheckNames refuses an application id (when given) or a topic name that
// the broker would refuse, as a usage error before anything connects: the
// operator reads the naming rule, not a broker's error code.
func CheckNames(app string, topicLists ...[]string) error {
	if app != "" {
		if err := CheckApplicationID(app); err != nil {
			return exitcode.UsageError(err)
		}
	}
	for _, topics := range topicLists {
		for _, t := range topics {
			if t == "" {
				return exitcode.UsageError(errors.New("a topic list has an empty topic name"))
			}
			if err := CheckTopicName(t); err != nil {
				return exitcode.Usagef("topic %w", err)
			}
		}
	}
	return nil
}

// LoadFor loads the stage file at path for a command that may also be
// given its application id, app (as named by appFlag in the message, e.g.
// "the application id" or "--application-id"; "" for none given): both
// name one stage, or it is a usage error. A file that does not load is a
// usage error too.
func LoadFor(path, app, appFlag string) (*Stage, error) {
	st, err := Load(path)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	if app = strings.TrimSpace(app); app != "" && app != st.ApplicationID {
		return nil, exitcode.Usagef("%s %s differs from %s's application_id %q", appFlag, boundedread.Quote(app), path, st.ApplicationID)
	}
	return st, nil
}
