module github.com/armature-go/armature

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)
