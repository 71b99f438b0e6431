module bertengine-samples

go 1.19

require bertengine v0.0.0

replace bertengine => ../../bindings/go
