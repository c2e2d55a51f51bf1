%% @doc Rate-limited warnings: at most one line per kind per interval, from any
%% process, with the number of suppressed lines.
%%
%% Riak logs a crashing post-commit hook only at debug level, so the hook reports its
%% own failures; a dead companion must not flood the log, hence the limit. The state
%% is an `atomics' array in `persistent_term' (slot 1: the interval; then, per kind,
%% the time of the last line and the count suppressed since).
-module(riak_events_log).

%% For the notifier.
-export([ensure/1]).
%% For every module of the hook.
-export([warning/3]).

-export_type([kind/0]).

-type kind() :: hook_error | parse_error | post_failed | breaker | overflow
              | no_companion | config | ring.

-define(KEY, {?MODULE, atomics}).
-define(NEVER, -(1 bsl 62)).

kinds() -> [hook_error, parse_error, post_failed, breaker, overflow,
            no_companion, config, ring].

%% @doc Create the state unless it exists, and set the interval.
-spec ensure(non_neg_integer()) -> ok.
ensure(IntervalMs) ->
    Ref = case persistent_term:get(?KEY, undefined) of
              undefined ->
                  R = atomics:new(1 + 2 * length(kinds()), [{signed, true}]),
                  [atomics:put(R, last_slot(K), ?NEVER) || K <- kinds()],
                  persistent_term:put(?KEY, R),
                  R;
              R ->
                  R
          end,
    atomics:put(Ref, 1, IntervalMs).

%% @doc Log `Format' with `Args' as a warning unless a line of the same kind was
%% logged less than the interval ago; then only count it. Never raises.
-spec warning(kind(), io:format(), [term()]) -> ok.
warning(Kind, Format, Args) ->
    try persistent_term:get(?KEY, undefined) of
        undefined -> ok;
        Ref -> maybe_log(Ref, Kind, Format, Args)
    catch
        _:_ -> ok
    end.

maybe_log(Ref, Kind, Format, Args) ->
    Now = erlang:monotonic_time(millisecond),
    Slot = last_slot(Kind),
    Last = atomics:get(Ref, Slot),
    Due = Now - Last >= atomics:get(Ref, 1),
    case Due andalso atomics:compare_exchange(Ref, Slot, Last, Now) =:= ok of
        true ->
            Suppressed = atomics:exchange(Ref, Slot + 1, 0),
            logger:warning("riak_events_hook ~p: " ++ Format ++
                               " (~b similar lines suppressed)",
                           [Kind | Args] ++ [Suppressed]),
            ok;
        false ->
            atomics:add(Ref, Slot + 1, 1)
    end.

last_slot(Kind) -> 2 + 2 * (position(Kind, kinds(), 0)).

position(K, [K | _], I) -> I;
position(K, [_ | Rest], I) -> position(K, Rest, I + 1).
