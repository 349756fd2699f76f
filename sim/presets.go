package sim

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/suggest"
)

//go:embed presets/*.yaml
var presetFiles embed.FS

// PresetNames returns the names of the built-in studies, sorted.
func PresetNames() []string {
	entries, err := presetFiles.ReadDir("presets")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// Preset returns the built-in study name: "ecs-burst" (an ECS
// DescribeClusters burst under three retry policies), "thundering-herd"
// (500 simultaneous calls retried without jitter, with additive jitter and
// with full jitter), "autoscale-step" (a step in load served under the
// CloudRun, KPA and HPA policies) or "quota-increase" (a tenant throttled at
// the default until a Service Quotas increase is approved at t = 60 s),
// "traffic-split" (90/10 over two revisions, with a tagged tester),
// "gradual-rollout" (10 → 50 → 100 %, each step warm), "warm-rollout" (a
// new revision started with the instances the load needs before it takes
// 100 %), "replacement-over-max" (a new revision at max instances, the
// old one draining over max within the request timeout), "gpu-service"
// (idle instances kept 10 minutes with a GPU, 15 without) or
// "fargate-runtask" (RunTask on Fargate taking count tokens from three
// buckets, all or none). Their files are in the presets directory of
// this package's source.
func Preset(name string) (*Study, error) {
	file := path.Join("presets", name+".yaml")
	data, err := presetFiles.ReadFile(file)
	if err != nil || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("%w: unknown preset %q%s (want one of %s)", ErrInvalidScenario, name, suggest.DidYouMean(name, PresetNames()), strings.Join(PresetNames(), ", "))
	}
	return ParseStudy(file, data)
}
