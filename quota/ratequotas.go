package quota

import (
	"math"

	"github.com/tollgate/tollgate/bucket"
)

// The sts, ssm, kms and secretsmanager presets come from AWS pages that
// publish a request rate (calls per second per account and region) and
// no burst. Such a quota is modelled as a bucket that holds one second
// of the rate and refills at the rate: capacity = rate (at least 1),
// refill = rate per second. A client that keeps under the rate is never
// throttled; one that sends a second's worth at once is not either, as
// AWS's one-second windows allow; more is.

// rateQuota is one published request-rate quota: the actions that share
// it and their rate per second.
type rateQuota struct {
	name    string
	rate    float64
	actions []string
	source  string // a note on the number, when it needs one
}

// rateLimit is the bucket of a rate-only quota: capacity the rate
// (rounded up, at least one call), refill the rate.
func rateLimit(rate float64) bucket.Limit {
	return bucket.MustLimit(max(1, int64(math.Ceil(rate))), rate)
}

// rateModel is what a rate service's Source adds: how its quotas became
// buckets.
const rateModel = "; each published rate R is a bucket of capacity R (at least 1), refilled R per second"

// rateService builds a preset from rate quotas.
func rateService(s *Service, quotas []rateQuota) *Service {
	s.Source += rateModel
	for _, q := range quotas {
		s.Categories = append(s.Categories, &Category{Name: q.name, Actions: append([]string(nil), q.actions...),
			Limit: rateLimit(q.rate), Source: q.source})
	}
	if err := s.index(); err != nil {
		panic(err) // the tables below are fixed; a test covers them
	}
	return s
}

func stsPreset() *Service {
	return rateService(&Service{Name: "sts", SigningName: "sts",
		Source: "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html (STS request quotas: 600 requests per second per account per Region, shared)",
		// STS speaks the query protocol: serve does not answer it.
		Throttle: Throttle{Code: "Throttling", Message: "Rate exceeded", HTTPStatus: 400},
	}, []rateQuota{{name: "requests", rate: 600, actions: []string{"AssumeRole", "DecodeAuthorizationMessage",
		"GetAccessKeyInfo", "GetCallerIdentity", "GetFederationToken", "GetSessionToken"},
		source: "AssumeRoleWithSAML and AssumeRoleWithWebIdentity are not signed with AWS credentials and are outside this quota"}})
}

func ssmPreset() *Service {
	return rateService(&Service{Name: "ssm", SigningName: "ssm", TargetPrefix: "AmazonSSM",
		Source:   "https://docs.aws.amazon.com/general/latest/gr/ssm.html (Systems Manager endpoints and quotas: Parameter Store max throughput, default throughput)",
		Throttle: Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400},
	}, []rateQuota{{name: "parameter-store-throughput", rate: 40, actions: []string{"GetParameter", "GetParameters", "GetParametersByPath"},
		source: "default throughput; with higher throughput enabled (a paid setting) GetParameter and GetParameters share 10,000 and GetParametersByPath has 100: an override"}})
}

func secretsManagerPreset() *Service {
	return rateService(&Service{Name: "secretsmanager", SigningName: "secretsmanager", TargetPrefix: "secretsmanager",
		Source:   "https://docs.aws.amazon.com/secretsmanager/latest/userguide/reference_limits.html (AWS Secrets Manager quotas)",
		Throttle: Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400},
	}, []rateQuota{
		{name: "read", rate: 10000, actions: []string{"DescribeSecret", "GetSecretValue"}},
		{name: "write", rate: 50, actions: []string{"PutSecretValue", "RemoveRegionsFromReplication", "ReplicateSecretToRegion",
			"StopReplicationToReplica", "UpdateSecret", "UpdateSecretVersionStage"}},
		{name: "resource-policy", rate: 50, actions: []string{"DeleteResourcePolicy", "GetResourcePolicy", "PutResourcePolicy", "ValidateResourcePolicy"}},
	})
}

// kmsOwnQuotas are the KMS operations with a request quota of their own.
var kmsOwnQuotas = []struct {
	action string
	rate   float64
}{
	{"CancelKeyDeletion", 5}, {"ConnectCustomKeyStore", 5}, {"CreateAlias", 5}, {"CreateCustomKeyStore", 5},
	{"CreateGrant", 50}, {"CreateKey", 5}, {"DeleteAlias", 15}, {"DeleteCustomKeyStore", 5},
	{"DeleteImportedKeyMaterial", 15}, {"DescribeCustomKeyStores", 5}, {"DescribeKey", 2000}, {"DisableKey", 5},
	{"DisableKeyRotation", 5}, {"DisconnectCustomKeyStore", 5}, {"EnableKey", 5}, {"EnableKeyRotation", 15},
	{"GetKeyLastUsage", 5}, {"GetKeyPolicy", 1000}, {"GetKeyRotationStatus", 1000}, {"GetParametersForImport", 1},
	{"GetPublicKey", 2000}, {"ImportKeyMaterial", 15}, {"ListAliases", 500}, {"ListGrants", 100},
	{"ListKeyPolicies", 100}, {"ListKeys", 500}, {"ListKeyRotations", 100}, {"ListResourceTags", 2000},
	{"ListRetirableGrants", 100}, {"PutKeyPolicy", 15}, {"ReplicateKey", 5}, {"RetireGrant", 50},
	{"RevokeGrant", 50}, {"RotateKeyOnDemand", 5}, {"ScheduleKeyDeletion", 15}, {"TagResource", 10},
	{"UntagResource", 5}, {"UpdateAlias", 5}, {"UpdateCustomKeyStore", 5}, {"UpdateKeyDescription", 5},
	{"UpdatePrimaryRegion", 5},
}

func kmsPreset() *Service {
	quotas := []rateQuota{
		{name: "cryptographic-symmetric", rate: 10000, actions: []string{"Decrypt", "Encrypt", "GenerateDataKey",
			"GenerateDataKeyWithoutPlaintext", "GenerateMac", "GenerateRandom", "ReEncrypt", "VerifyMac"},
			source: "10,000 is the default; AWS gives 20,000 in us-east-2, ap-southeast-1, ap-southeast-2, ap-northeast-1, eu-central-1, eu-west-2 and 100,000 in us-east-1, us-west-2, eu-west-1 (overrides by region); Encrypt, Decrypt and ReEncrypt with an RSA key count to the asymmetric quota instead, which needs the key"},
		{name: "cryptographic-asymmetric", rate: 1000, actions: []string{"DeriveSharedSecret", "Sign", "Verify"},
			source: "RSA, ECC and ML-DSA keys each have 1,000, counted separately; one bucket here, as the key type is not in the call's name"},
		{name: "generate-data-key-pair", rate: 20, actions: []string{"GenerateDataKeyPair", "GenerateDataKeyPairWithoutPlaintext"},
			source: "the quota depends on the key pair spec (ECC 100, RSA_2048 20, RSA_3072 4, RSA_4096 1); RSA_2048's here"},
	}
	for _, q := range kmsOwnQuotas {
		quotas = append(quotas, rateQuota{name: kebab(q.action), rate: q.rate, actions: []string{q.action}})
	}
	return rateService(&Service{Name: "kms", SigningName: "kms", TargetPrefix: "TrentService",
		Source: "https://docs.aws.amazon.com/kms/latest/developerguide/requests-per-second.html (AWS KMS request quotas)",
		Throttle: Throttle{Code: "ThrottlingException", HTTPStatus: 400,
			Message: "You have exceeded the rate at which you may call KMS. Reduce the frequency of your calls."},
	}, quotas)
}
