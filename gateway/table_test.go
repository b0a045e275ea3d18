package gateway_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway"
)

// TestReadmeListsEveryKind holds the README's error tables to the table the code
// renders: every kind's code stands in a row with its HTTP status.
func TestReadmeListsEveryKind(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // code -> the row's status cell
	row := regexp.MustCompile("(?m)^\\| ([0-9 /]+) \\| (`[a-z_]+`(?: / `[a-z_]+`)?) \\|")
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		statuses := strings.Split(m[1], " / ")
		for i, code := range strings.Split(m[2], " / ") {
			rows[strings.Trim(code, "`")+" "+strings.TrimSpace(statuses[min(i, len(statuses)-1)])] = m[0]
		}
	}
	for _, k := range gateway.Kinds {
		if _, ok := rows[k.Code+" "+strconv.Itoa(k.Status)]; !ok {
			t.Errorf("README's error tables have no row for %s with status %d", k.Code, k.Status)
		}
	}
}
