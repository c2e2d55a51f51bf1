%% @doc A circuit breaker for one companion (pure; the caller passes the time).
%%
%% <ul>
%% <li>`closed': requests go; `Threshold' consecutive failures open it.</li>
%% <li>`open': requests are refused until `CooldownMs' has passed; then the next
%%     request is let through as a probe and the breaker is `half_open'.</li>
%% <li>`half_open': other requests are refused while the probe runs; its success
%%     closes the breaker, its failure opens it for another cool-down.</li>
%% </ul>
%% Any success closes the breaker (a request sent before it opened may still answer).
-module(riak_events_breaker).

-export([new/0, allow/2, success/1, failure/4, status/1]).

-export_type([breaker/0, status/0]).

-type status() :: closed | open | half_open.
-opaque breaker() :: #{status := status(),
                       failures := non_neg_integer(),
                       until := integer()}.

%% @doc A closed breaker.
-spec new() -> breaker().
new() -> #{status => closed, failures => 0, until => 0}.

%% @doc May a request go at time `NowMs'?
-spec allow(integer(), breaker()) -> {boolean(), breaker()}.
allow(_NowMs, #{status := closed} = B) -> {true, B};
allow(NowMs, #{status := open, until := Until} = B) when NowMs >= Until ->
    {true, B#{status := half_open}};
allow(_NowMs, B) -> {false, B}.

%% @doc A request succeeded.
-spec success(breaker()) -> breaker().
success(B) -> B#{status := closed, failures := 0}.

%% @doc A request failed at `NowMs'; `opened' when this failure opened the breaker.
-spec failure(integer(), pos_integer(), non_neg_integer(), breaker()) ->
          {opened | counted, breaker()}.
failure(NowMs, _Threshold, CooldownMs, #{status := half_open} = B) ->
    {opened, B#{status := open, until := NowMs + CooldownMs}};
failure(NowMs, Threshold, CooldownMs, #{status := closed, failures := F} = B)
  when F + 1 >= Threshold ->
    {opened, B#{status := open, failures := F + 1, until := NowMs + CooldownMs}};
failure(_NowMs, _Threshold, _CooldownMs, #{failures := F} = B) ->
    {counted, B#{failures := F + 1}}.

%% @doc The state and the consecutive failures, for status reports.
-spec status(breaker()) -> {status(), non_neg_integer()}.
status(#{status := S, failures := F}) -> {S, F}.
