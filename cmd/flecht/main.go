// Command flecht runs and operates Kafka stream-processing pipelines.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/flecht-dev/flecht/internal/cli"
)

func main() {
	// Commands that run until stopped (dev, run) watch this context; a
	// second signal is left to the default handler so it kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // after the first signal, restore the default handler
	code := cli.Main(ctx, cli.NewFactory(), os.Args[1:])
	stop()
	os.Exit(code)
}
