// Package stage holds what every kind of stage shares: the output Message
// and how it is placed on a partition, the config topics' store
// (docs/contract.md §6), and where a stage keeps its state on disk. The
// transformer runner (internal/transformer), the extractor runner
// (internal/extract) and the MQTT bridge (internal/mqtt) build on it.
package stage
