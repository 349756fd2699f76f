package servicequotas

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tollgate/tollgate/awsjson"
)

// Tags on quota ARNs: what the model and the store allow.
const (
	// MaxTagsPerQuota is how many tags one quota ARN may have (AWS's
	// 50); a TagResource that would leave more is TooManyTagsException
	// and applies none.
	MaxTagsPerQuota = 50
	// MaxTaggedPerAccount is how many of one account's quota ARNs (over
	// every region) may have tags; tagging one more is
	// TooManyTagsException.
	MaxTaggedPerAccount = 500
	// MaxTaggedUnmapped is how many quota ARNs all unmapped accounts
	// together may have tags on; tagging one more, from any unmapped
	// key, is TooManyTagsException. Mapped accounts are not counted.
	MaxTaggedUnmapped = 1000
	// maxTagsPerCall is the model's bound on Tags and TagKeys in one call.
	maxTagsPerCall = 200
	maxArnLen      = 1011
)

const codeTooManyTags = "TooManyTagsException"

// The model's patterns of a resource ARN and of a tag's key and value.
var (
	arnPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^arn:aws(-[\w]+)*:*:.+:[0-9]{12}:.+$`)
	})
	tagPattern = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)
)

// tagRes names a quota ARN in the store: its account's applied key.
type tagRes struct {
	account  string
	key      string // appliedKey of the quota
	unmapped bool   // the caller's access key is not mapped
}

func errTooManyTags(msg string) error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeTooManyTags, Message: msg}
}

// resource checks a ResourceARN: the model's pattern (else
// IllegalArgumentException), the caller's own account (else
// AccessDeniedException, whether or not the quota exists), and a quota
// of the catalog in the caller's region (else NoSuchResourceException).
func (s *Service) resource(id awsjson.Identity, arn *string) (tagRes, error) {
	if arn == nil || *arn == "" {
		return tagRes{}, illegal("ResourceARN is required")
	}
	a := *arn
	if len(a) > maxArnLen || !arnPattern().MatchString(a) {
		return tagRes{}, illegal("ResourceARN " + awsjson.Clip(a) + " is not an ARN")
	}
	parts := strings.SplitN(a, ":", 6)
	missing := noSuch("no quota " + awsjson.Clip(a))
	if len(parts) != 6 {
		return tagRes{}, missing
	}
	if parts[4] != awsjson.AccountID(id.Account) {
		return tagRes{}, &awsjson.Error{Status: http.StatusBadRequest, Code: codeAccessDenied,
			Message: "ResourceARN " + awsjson.Clip(a) + " is not of your account"}
	}
	svc, code, ok := strings.Cut(parts[5], "/")
	if parts[1] != "aws" || parts[2] != "servicequotas" || parts[3] != id.Region || !ok {
		return tagRes{}, missing
	}
	c := s.Catalog()
	q, ok := c.Quota(svc, code)
	if !ok {
		return tagRes{}, missing
	}
	return tagRes{account: id.Account, key: appliedKey(id.Account, id.Region, q.ServiceCode, q.Code),
		unmapped: id.AccessKeyID != "" && !c.cfg.MapsKey(id.AccessKeyID)}, nil
}

// checkTagKey checks a key as the model does and refuses AWS's
// reserved prefix.
func checkTagKey(k string) error {
	if n := utf8.RuneCountInString(k); n < 1 || n > 128 || !tagPattern.MatchString(k) {
		return illegal("tag key " + awsjson.Clip(k) + " must be 1 to 128 letters, digits, spaces or _ . : / = + - @")
	}
	if strings.HasPrefix(strings.ToLower(k), "aws:") {
		return illegal("tag key " + awsjson.Clip(k) + ": the aws: prefix is reserved")
	}
	return nil
}

type tag struct {
	Key   *string `json:"Key"`
	Value *string `json:"Value"`
}

func (s *Service) tagResource(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		ResourceARN *string `json:"ResourceARN"`
		Tags        []tag   `json:"Tags"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.Tags) < 1 || len(in.Tags) > maxTagsPerCall {
		return nil, illegal("Tags must have 1 to " + strconv.Itoa(maxTagsPerCall) + " tags")
	}
	tags := make(map[string]string, len(in.Tags))
	for _, t := range in.Tags {
		if t.Key == nil || t.Value == nil {
			return nil, illegal("every tag needs a Key and a Value")
		}
		if err := checkTagKey(*t.Key); err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(*t.Value) > 256 || !tagPattern.MatchString(*t.Value) {
			return nil, illegal("tag value of " + awsjson.Clip(*t.Key) + " must be 0 to 256 letters, digits, spaces or _ . : / = + - @")
		}
		if _, dup := tags[*t.Key]; dup {
			return nil, illegal("tag key " + awsjson.Clip(*t.Key) + " is given twice")
		}
		tags[*t.Key] = *t.Value
	}
	res, err := s.resource(id, in.ResourceARN)
	if err != nil {
		return nil, err
	}
	if err := s.be.tag(ctx, res, tags); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *Service) untagResource(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		ResourceARN *string  `json:"ResourceARN"`
		TagKeys     []string `json:"TagKeys"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.TagKeys) < 1 || len(in.TagKeys) > maxTagsPerCall {
		return nil, illegal("TagKeys must have 1 to " + strconv.Itoa(maxTagsPerCall) + " keys")
	}
	for _, k := range in.TagKeys {
		if n := utf8.RuneCountInString(k); n < 1 || n > 128 || !tagPattern.MatchString(k) {
			return nil, illegal("tag key " + awsjson.Clip(k) + " must be 1 to 128 letters, digits, spaces or _ . : / = + - @")
		}
	}
	res, err := s.resource(id, in.ResourceARN)
	if err != nil {
		return nil, err
	}
	if err := s.be.untag(ctx, res, in.TagKeys); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

type tagOut struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

func (s *Service) listTags(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		ResourceARN *string `json:"ResourceARN"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	res, err := s.resource(id, in.ResourceARN)
	if err != nil {
		return nil, err
	}
	tags, err := s.be.tags(ctx, res)
	if err != nil {
		return nil, err
	}
	out := struct {
		Tags []tagOut `json:"Tags"`
	}{Tags: make([]tagOut, 0, len(tags))}
	for k, v := range tags {
		out.Tags = append(out.Tags, tagOut{k, v})
	}
	slices.SortFunc(out.Tags, func(a, b tagOut) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
