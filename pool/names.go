package pool

import (
	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/runner"
)

// The types a user of the pool names, defined where they belong (the
// seam to what runs instances in package pool/runner; one revision's
// parts in package pool/revision) and named here too, so that one import
// does, as package os names the types of io/fs.
type (
	// Runner starts the instances of one service revision (runner.Runner).
	Runner = runner.Runner
	// Instance is one running instance (runner.Instance).
	Instance = runner.Instance
	// InstanceSpec names one instance for its Runner (runner.InstanceSpec).
	InstanceSpec = runner.InstanceSpec
	// Warmer prepares a Runner's next start (runner.Warmer).
	Warmer = runner.Warmer
	// Sharer is a Runner whose instances other replicas send to as well
	// (runner.Sharer).
	Sharer = runner.Sharer
	// LoadSharer is a Sharer whose replicas split capacity by load and
	// decide the count together (runner.LoadSharer).
	LoadSharer = runner.LoadSharer
	// Basis is what a shared policy's count was decided on (runner.Basis).
	Basis = runner.Basis
	// BasisPolicy is a shared policy that says its Basis
	// (runner.BasisPolicy).
	BasisPolicy = runner.BasisPolicy
	// GPURunner is a Runner that reports its instances' GPUs
	// (runner.GPURunner).
	GPURunner = runner.GPURunner
	// CPUAllocator is an Instance that knows its CPU allocation
	// (runner.CPUAllocator).
	CPUAllocator = runner.CPUAllocator
	// Registrar lists a service's ready instances in a service registry
	// (revision.Registrar).
	Registrar = revision.Registrar
	// Liveness is an instance's liveness check (revision.Liveness).
	Liveness = revision.Liveness
	// ScaleEvent is one change of a revision's recommended count
	// (revision.ScaleEvent).
	ScaleEvent = revision.ScaleEvent
	// ServiceStatus is one service in the admin listing
	// (revision.ServiceStatus).
	ServiceStatus = revision.ServiceStatus
	// InstanceStatus is one instance in the admin listing
	// (revision.InstanceStatus).
	InstanceStatus = revision.InstanceStatus
)

// ErrOOMKilled is wrapped by Instance.Err when the kernel's OOM killer
// killed the instance (runner.ErrOOMKilled).
var ErrOOMKilled = runner.ErrOOMKilled

// Bounds of a revision, as package revision defines them.
const (
	// DefaultStopGrace is the time between SIGTERM and the kill when a
	// service sets none: 10 s, as Cloud Run.
	DefaultStopGrace = revision.DefaultStopGrace
	// MaxOverMaxGrace bounds how long instances may run beyond max
	// instances while they finish their requests: 15 minutes, as Cloud
	// Run.
	MaxOverMaxGrace = revision.MaxOverMaxGrace
	// DefaultLivenessPeriod, DefaultLivenessTimeout and
	// DefaultLivenessFailureThreshold are Cloud Run's liveness defaults
	// (Liveness.WithDefaults).
	DefaultLivenessPeriod           = revision.DefaultLivenessPeriod
	DefaultLivenessTimeout          = revision.DefaultLivenessTimeout
	DefaultLivenessFailureThreshold = revision.DefaultLivenessFailureThreshold
	// MaxLivenessPeriod bounds a Liveness's Period, Timeout and
	// InitialDelay; MaxLivenessFailureThreshold its FailureThreshold.
	MaxLivenessPeriod           = revision.MaxLivenessPeriod
	MaxLivenessFailureThreshold = revision.MaxLivenessFailureThreshold
)
