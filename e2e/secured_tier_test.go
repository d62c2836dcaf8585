//go:build e2e

package e2e

import (
	"testing"
)

// TestSecuredTierUp: the secured node serves the super user on its SCRAM
// listener, and a principal without ACLs sees no topic.
func TestSecuredTierUp(t *testing.T) {
	s := secured(t)
	topic := topicName(t, "up")
	s.createTopic(t, topic, 1, nil)
	td, err := s.admin(t).ListTopics(testCtx(t, 30e9), topic)
	if err != nil || !td.Has(topic) {
		t.Fatalf("admin lists %s: %v %v", topic, td, err)
	}
}
