module bertengine-samples

go 1.19

require github.com/bertengine/bertengine/bindings/go v0.0.0

replace github.com/bertengine/bertengine/bindings/go => ../../bindings/go
