module github.com/bertengine/bertengine/bindings/go

go 1.19
