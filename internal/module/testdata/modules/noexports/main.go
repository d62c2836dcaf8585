// Command noexports is a WASI reactor that exports none of the ABI.
package main

func main() {}
