module bertengine

go 1.19
