package idemcheck

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdict is a check's outcome.
type Verdict string

// The verdicts. Fail and Error fail a run; NotJudged leaves it unfinished
// (see Report.Incomplete); the others do not.
const (
	// Pass: the endpoint keeps the rule.
	Pass Verdict = "pass"
	// Fail: the endpoint breaks a MUST.
	Fail Verdict = "fail"
	// NotApplicable: the check's input was not given, or the rule has
	// nothing to hold the endpoint to (a one-member body cannot be
	// reordered).
	NotApplicable Verdict = "n/a"
	// NotJudged: the check ran, but what it was given did not bring the
	// endpoint into the state the rule is about (the -body-5xx body was
	// not answered 5xx, the -url-variant names no route), so there is no
	// evidence either way. It is never a pass: the input needs fixing.
	NotJudged Verdict = "not judged"
	// Advice: the endpoint breaks a SHOULD or a rule of this project.
	Advice Verdict = "advice"
	// Error: the check could not be run (the network failed, the first
	// request did not succeed, the effects URL did not answer).
	Error Verdict = "error"
)

// Result is one check's verdict, the reason for it and the evidence.
type Result struct {
	Check
	Verdict Verdict `json:"verdict"`
	// Reason says why, in a sentence or a few.
	Reason string `json:"reason"`
	// Evidence is the requests and answers the verdict rests on, trimmed.
	Evidence []Exchange `json:"evidence,omitempty"`
}

// Exchange is one request and its answer, trimmed for a report: bodies cut
// to a few hundred bytes, and credentials never shown.
type Exchange struct {
	// Note says what the request was for ("replay", "copy 7 of 30").
	Note   string `json:"note,omitempty"`
	Method string `json:"method"`
	URL    string `json:"url"`
	// Key is the Idempotency-Key sent; absent when none was sent.
	Key *string `json:"key,omitempty"`
	// Credentials is "H2" when the second credentials were sent.
	Credentials string `json:"credentials,omitempty"`
	RequestBody string `json:"request_body,omitempty"`
	Status      int    `json:"status,omitempty"`
	// Header holds the answer's headers that the checks read.
	Header    map[string]string `json:"header,omitempty"`
	Body      string            `json:"body,omitempty"`
	ElapsedMS float64           `json:"elapsed_ms"`
	Error     string            `json:"error,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	// Target is the method and URL under test.
	Target  string        `json:"target"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Requests is how many requests were sent.
	Requests int      `json:"requests"`
	Plan     Plan     `json:"plan"`
	Results  []Result `json:"results"`
}

// Failed reports whether any check failed or could not be run.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Verdict == Fail || res.Verdict == Error {
			return true
		}
	}
	return false
}

// Incomplete reports whether a check was not judged: no check failed on
// that account, but the run did not check what it was asked to.
func (r *Report) Incomplete() bool {
	for _, res := range r.Results {
		if res.Verdict == NotJudged {
			return true
		}
	}
	return false
}

// Result returns the result of the check with this id.
func (r *Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// Counts returns how many results have each verdict.
func (r *Report) Counts() map[Verdict]int {
	n := map[Verdict]int{}
	for _, res := range r.Results {
		n[res.Verdict]++
	}
	return n
}

// Summary is one line: "12 pass, 1 fail, 2 advice, 0 not judged, 1 n/a, 0 error".
func (r *Report) Summary() string {
	n := r.Counts()
	return fmt.Sprintf("%d pass, %d fail, %d advice, %d not judged, %d n/a, %d error",
		n[Pass], n[Fail], n[Advice], n[NotJudged], n[NotApplicable], n[Error])
}

// WriteText writes the summary table, then the reason and evidence of every
// result that is not a plain pass (of every result, with verbose).
func (r *Report) WriteText(w io.Writer, verbose bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "idemcheck %s: %d requests in %s\n\n", r.Target, r.Requests, r.Elapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tLEVEL\tVERDICT\tREASON")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.ID, res.Level, res.Verdict, firstSentence(res.Reason))
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\n%s\n", r.Summary())
	for _, res := range r.Results {
		if res.Verdict == Pass && !verbose || res.Verdict == NotApplicable {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%s, %s): %s\n  rule: %s\n  source: %s\n  why: %s\n", res.ID, res.Level, res.Verdict,
			firstSentence(res.Reason), res.Rule, res.Source, res.Reason)
		for _, e := range res.Evidence {
			b.WriteString(e.text())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (e Exchange) text() string {
	var b strings.Builder
	note := ""
	if e.Note != "" {
		note = " (" + e.Note + ")"
	}
	key := "no key"
	if e.Key != nil {
		key = fmt.Sprintf("key %q", *e.Key)
	}
	creds := ""
	if e.Credentials != "" {
		creds = ", " + e.Credentials
	}
	fmt.Fprintf(&b, "  > %s %s, %s%s%s\n", e.Method, e.URL, key, creds, note)
	if e.RequestBody != "" {
		fmt.Fprintf(&b, "    %s\n", e.RequestBody)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, "  < error: %s\n", e.Error)
		return b.String()
	}
	fmt.Fprintf(&b, "  < %d in %.1f ms", e.Status, e.ElapsedMS)
	for _, name := range sortedKeys(e.Header) {
		fmt.Fprintf(&b, "; %s: %s", name, e.Header[name])
	}
	b.WriteString("\n")
	if e.Body != "" {
		fmt.Fprintf(&b, "    %s\n", e.Body)
	}
	return b.String()
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteJUnit writes the report as a JUnit XML test suite, the format CI
// systems show: a fail is a <failure>, an error an <error>, a check that
// does not apply or was not judged is <skipped> (its message says which),
// and advice passes with its text in <system-out>.
func (r *Report) WriteJUnit(w io.Writer) error {
	type problem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *problem `xml:"failure,omitempty"`
		Error     *problem `xml:"error,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type testsuite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Errors   int        `xml:"errors,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Time     string     `xml:"time,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	n := r.Counts()
	suite := testsuite{Name: "idemcheck " + r.Target, Tests: len(r.Results), Failures: n[Fail], Errors: n[Error],
		Skipped: n[NotApplicable] + n[NotJudged], Time: fmt.Sprintf("%.3f", r.Elapsed.Seconds())}
	for _, res := range r.Results {
		tc := testcase{Name: res.ID, Classname: "idemcheck." + string(res.Level), Time: "0"}
		detail := fmt.Sprintf("rule: %s\nsource: %s\nwhy: %s\n", res.Rule, res.Source, res.Reason)
		for _, e := range res.Evidence {
			detail += e.text()
		}
		switch res.Verdict {
		case Fail:
			tc.Failure = &problem{Message: res.Reason, Type: string(res.Level), Text: detail}
		case Error:
			tc.Error = &problem{Message: res.Reason, Type: "could not check", Text: detail}
		case NotApplicable:
			tc.Skipped = &skipped{Message: res.Reason}
		case NotJudged:
			tc.Skipped = &skipped{Message: "not judged: " + res.Reason}
			tc.SystemOut = detail
		case Advice:
			tc.SystemOut = "advice: " + detail
		case Pass:
			tc.SystemOut = res.Reason
		}
		suite.Cases = append(suite.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(suite); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// firstSentence cuts a reason to its first sentence, for the table.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
