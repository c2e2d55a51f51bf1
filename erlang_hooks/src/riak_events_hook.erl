%% @doc The post-commit hook on the `epochs' bucket type.
%%
%% Declared in the bucket type's props as
%% `"postcommit":[{"mod":"riak_events_hook","fun":"postcommit"}]'. Riak calls
%% {@link postcommit/1} inside the put process of the coordinating node, after the
%% client got its answer, with no timeout; a crash is only counted
%% (`postcommit_fail') and logged at debug level. So this function does no I/O and
%% no routing: it takes the bucket, the key and the values of the live siblings and
%% casts them to {@link riak_events_notifier}, and it catches, counts and logs (rate
%% limited) anything that goes wrong.
-module(riak_events_hook).

%% For Riak.
-export([postcommit/1]).
%% For tests.
-export([live_values/1]).

-define(DELETED, <<"X-Riak-Deleted">>).

%% @doc The post-commit hook: hand the metadata write to the notifier.
%% @returns `ok' always (Riak ignores the value of a post-commit hook except
%% `fail' / `{fail, _}', which it counts as failures).
-spec postcommit(term()) -> ok.
postcommit(Object) ->
    try
        Bucket = riak_object:bucket(Object),
        Key = riak_object:key(Object),
        case live_values(riak_object:get_contents(Object)) of
            [] ->
                riak_events_stats:incr(tombstones);
            Values ->
                _ = riak_events_notifier:notify(Bucket, Key, Values),
                ok
        end
    catch
        Class:Reason ->
            riak_events_stats:incr(hook_errors),
            riak_events_log:warning(hook_error, "post-commit hook: ~p:~0p", [Class, Reason])
    end,
    ok.

%% @doc The values of the siblings that are not tombstones (deletes carry
%% `X-Riak-Deleted' in their metadata). Siblings are normal here: all are kept and
%% the notifier merges them.
-spec live_values([{term(), term()}]) -> [term()].
live_values(Contents) ->
    [Value || {Metadata, Value} <- Contents, not deleted(Metadata)].

%% Riak's object metadata is a `dict'.
deleted(Metadata) ->
    try dict:is_key(?DELETED, Metadata)
    catch _:_ -> false
    end.
