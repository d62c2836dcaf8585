// Command celsius-v1 is the buggy version.
package main

import "flecht.e2e/modules/celsius"

func init() { celsius.Register(false) }

func main() {}
