// Command roam is the roam command line; see internal/cli.
package main

import (
	"os"

	"roam/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
