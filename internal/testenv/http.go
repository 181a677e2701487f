package testenv

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// WaitGet waits until GET url with client answers 200 OK (with its whole
// body read), then returns the body.
func WaitGet(t testing.TB, client *http.Client, url string, timeout time.Duration) string {
	t.Helper()
	var body string
	WaitFor(t, timeout, "GET "+url, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK, fmt.Errorf("status %d, body %q, err %v", resp.StatusCode, b, err)
	})
	return body
}
