module github.com/tollgate/tollgate

go 1.26.0

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/time v0.16.0 // indirect
)
