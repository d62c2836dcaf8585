package stagefile

import (
	"errors"

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
