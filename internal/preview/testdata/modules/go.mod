module flecht.test/previewmodules

go 1.24

require github.com/flecht-dev/flecht/sdk v0.0.0-00010101000000-000000000000

replace github.com/flecht-dev/flecht/sdk => ../../../../sdk
