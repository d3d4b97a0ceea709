module backoffshim.test/go

go 1.19
