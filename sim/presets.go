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
// the default until a Service Quotas increase is approved at t = 60 s). Their files are in the presets directory
// of this package's source.
func Preset(name string) (*Study, error) {
	file := path.Join("presets", name+".yaml")
	data, err := presetFiles.ReadFile(file)
	if err != nil || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("%w: unknown preset %q%s (want one of %s)", ErrInvalidScenario, name, suggest.DidYouMean(name, PresetNames()), strings.Join(PresetNames(), ", "))
	}
	return ParseStudy(file, data)
}
