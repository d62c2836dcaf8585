// Command flecht-docs writes flecht's command reference (docs/reference),
// its man pages (docs/man) and the README's command table from the cobra
// command tree. `make docs` runs it from the repository's root; it is not
// part of the flecht binary.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/flecht-dev/flecht/internal/docgen"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root")
	flag.Parse()
	for k, v := range docgen.Environment(os.Environ()) {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, "flecht-docs:", err)
			os.Exit(1)
		}
	}
	if err := docgen.Generate(*repo); err != nil {
		fmt.Fprintln(os.Stderr, "flecht-docs:", err)
		os.Exit(1)
	}
}
