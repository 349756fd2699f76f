package gateway

import "github.com/tollgate/tollgate/quota"

// unknownTargetMessage is the error message for an X-Amz-Target prefix the
// config has no service for; a built-in service's prefix names the preset
// that serves it, which the config lacks.
func unknownTargetMessage(prefix string) string {
	msg := "unknown X-Amz-Target prefix " + clip(prefix)
	if name, ok := quota.PresetOfTargetPrefix(prefix); ok {
		msg += ": it is the " + name + " preset's, which the config does not have: add preset " + name +
			` to the config ("- preset: ` + name + `" under services)`
	}
	return msg
}
