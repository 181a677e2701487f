package main

import (
	"errors"
	"regexp"
	"slices"
	"strings"
)

// nameFileFields rewrites a validation error so that a flag whose value
// came from the --config file is named by the file's field too, as
// upstream names them ("maxPods (--max-pods)").
func (o *options) nameFileFields(err error) error {
	if err == nil || len(o.fileFields) == 0 {
		return err
	}
	msg := err.Error()
	flags := make([]string, 0, len(o.fileFields))
	for f := range o.fileFields {
		flags = append(flags, f)
	}
	slices.Sort(flags)
	for _, f := range flags {
		re := regexp.MustCompile(`--` + regexp.QuoteMeta(f) + `([^a-z0-9-]|$)`)
		msg = re.ReplaceAllString(msg, o.fileFields[f]+" (--"+f+" in "+o.Config+")$1")
	}
	return errors.New(strings.TrimSpace(msg))
}
