// Command abiv2 declares an ABI version this flecht does not speak.
package main

func main() {}

//go:wasmexport flecht_abi_v2
func abiV2() {}

//go:wasmexport flecht_buffer
func buffer(n int32) int32 { return 0 }

//go:wasmexport flecht_transform
func transform(n int32) int64 { return 0 }
