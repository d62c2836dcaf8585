//go:build !unix

package boundedread

const openFlags = 0
