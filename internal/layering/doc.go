// Package layering holds no code, only the test that keeps flecht's
// packages in their layers (docs/architecture.md): the command layer
// (internal/cli) is thin and talks to Kafka only through the domain
// packages, and the domain packages know nothing of commands or
// terminals.
package layering
