module github.com/flecht-dev/flecht/sdk

go 1.24
