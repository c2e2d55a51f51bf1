%% @doc The hook's configuration: application environment of `riak_events_hook'
%% (set in Riak's advanced.config), validated once into a map with documented defaults.
%%
%% A bad value never crashes anything: it is replaced by its default and reported in
%% the returned error list (the notifier counts and logs it).
-module(riak_events_config).

%% For the notifier.
-export([load/0, from_list/1]).
%% For operators and tests.
-export([defaults/0, app/0]).

-export_type([config/0, ring_spec/0]).

-type ring_spec() :: riak_core | {static, #{owners := [node()],
                                           down => [node()],
                                           n_val => pos_integer()}}.
%% `riak_core': preflists from the running Riak (the default). `{static, ...}': a ring
%% supplied by a test (owners of positions 0..Q-1, down nodes, n_val).

-type config() :: #{
        companion_port := inet:port_number(),
        companion_urls := #{node() => string()},
        companion_path := string(),
        events_bucket_type := binary(),
        events_bucket := binary(),
        timeout_ms := pos_integer(),
        queue_max := pos_integer(),
        max_in_flight := pos_integer(),
        breaker_failures := pos_integer(),
        breaker_cooldown_ms := pos_integer(),
        log_interval_ms := non_neg_integer(),
        max_value_bytes := pos_integer(),
        ring := ring_spec()}.

-define(APP, riak_events_hook).

%% @doc The application whose environment holds the configuration.
-spec app() -> atom().
app() -> ?APP.

%% @doc Every setting with its default value.
%%
%% <ul>
%% <li>`companion_port' (5000): port of the companion on every node; its host is the
%%     part after `@' in the node name.</li>
%% <li>`companion_urls' (`#{}'): node name to companion base URL (`"http://h:p"'),
%%     used instead of host + `companion_port' for the nodes it names.</li>
%% <li>`companion_path' (`"/v1/keys"'): path appended to the base URL.</li>
%% <li>`events_bucket_type', `events_bucket' (`<<"events">>'): where chunks live.</li>
%% <li>`timeout_ms' (2000): whole-request deadline of one POST.</li>
%% <li>`queue_max' (1024): metadata writes waiting for the notifier, and key groups
%%     waiting for a free request slot; beyond it new work is dropped and counted.</li>
%% <li>`max_in_flight' (8): POSTs running at once.</li>
%% <li>`breaker_failures' (5): consecutive failures that open a companion's breaker.</li>
%% <li>`breaker_cooldown_ms' (10000): open time before one probe request.</li>
%% <li>`log_interval_ms' (10000): at most one warning per kind per interval.</li>
%% <li>`max_value_bytes' (4194304): larger metadata values are not parsed.</li>
%% <li>`ring' (`riak_core'): see {@link ring_spec()}; only tests change it.</li>
%% </ul>
-spec defaults() -> config().
defaults() ->
    #{companion_port => 5000,
      companion_urls => #{},
      companion_path => "/v1/keys",
      events_bucket_type => <<"events">>,
      events_bucket => <<"events">>,
      timeout_ms => 2000,
      queue_max => 1024,
      max_in_flight => 8,
      breaker_failures => 5,
      breaker_cooldown_ms => 10000,
      log_interval_ms => 10000,
      max_value_bytes => 4194304,
      ring => riak_core}.

%% @doc Read and validate the application environment.
%%
%% Loads the application first (when its `.app' file is on the code path) so that
%% values from advanced.config are merged into its environment.
-spec load() -> {config(), [{atom(), term()}]}.
load() ->
    _ = application:load(?APP),
    from_list(application:get_all_env(?APP)).

%% @doc Validate settings given as a proplist; unknown keys are ignored.
%% @returns the configuration and the `{Key, BadValue}' pairs that were replaced by
%% their defaults.
-spec from_list([{atom(), term()}]) -> {config(), [{atom(), term()}]}.
from_list(Env) ->
    Defaults = defaults(),
    maps:fold(
      fun(Key, Default, {Config, Errors}) ->
              case lists:keyfind(Key, 1, Env) of
                  false ->
                      {Config#{Key => Default}, Errors};
                  {Key, Value} ->
                      case check(Key, Value) of
                          {ok, Good} -> {Config#{Key => Good}, Errors};
                          error -> {Config#{Key => Default}, [{Key, Value} | Errors]}
                      end
              end
      end, {#{}, []}, Defaults).

%% -- validation --------------------------------------------------------------------

check(companion_port, P) when is_integer(P), P > 0, P < 65536 -> {ok, P};
check(companion_urls, M) when is_map(M) -> urls(maps:to_list(M));
check(companion_urls, L) when is_list(L) -> urls(L);
check(companion_path, "/" ++ _ = P) -> text(P);
check(companion_path, <<"/", _/binary>> = P) -> text(P);
check(events_bucket_type, B) -> name(B);
check(events_bucket, B) -> name(B);
check(ring, riak_core) -> {ok, riak_core};
check(ring, {static, #{owners := [_ | _]} = Spec}) -> {ok, {static, Spec}};
check(log_interval_ms, N) when is_integer(N), N >= 0 -> {ok, N};
check(Key, N) when is_integer(N), N > 0,
                   (Key =:= timeout_ms orelse Key =:= queue_max orelse
                    Key =:= max_in_flight orelse Key =:= breaker_failures orelse
                    Key =:= breaker_cooldown_ms orelse Key =:= max_value_bytes) ->
    {ok, N};
check(_, _) -> error.

urls(Pairs) ->
    try
        {ok, maps:from_list([{node_atom(N), url(U)} || {N, U} <- Pairs])}
    catch
        _:_ -> error
    end.

node_atom(N) when is_atom(N) -> N;
node_atom(N) when is_list(N) -> list_to_atom(N);
node_atom(N) when is_binary(N) -> binary_to_atom(N, utf8).

url(U) ->
    {ok, Text} = text(U),
    {ok, _} = riak_events_http:parse_url(Text),
    Text.

text(T) when is_binary(T) -> {ok, binary_to_list(T)};
text(T) when is_list(T) ->
    case io_lib:printable_latin1_list(T) of
        true -> {ok, T};
        false -> error
    end;
text(_) -> error.

name(B) when is_binary(B), B =/= <<>> -> {ok, B};
name([_ | _] = L) ->
    try {ok, list_to_binary(L)} catch _:_ -> error end;
name(_) -> error.
