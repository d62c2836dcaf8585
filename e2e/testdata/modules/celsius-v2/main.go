// Command celsius-v2 is the fixed version.
package main

import "flecht.e2e/modules/celsius"

func init() { celsius.Register(true) }

func main() {}
