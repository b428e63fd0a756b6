package migrate

// The machines' events and actions are sealed: only this package's types
// are events of a machine (SourceEvent, DestEvent) or actions it asks for
// (SourceAction, DestAction), so a driver's switch over them is checked
// against these lists, and no other value can be stepped in.

// SourceEvent is an event of the source machine (source.go).
type SourceEvent interface{ sourceEvent() }

// SourceAction is an action the source machine asks its driver for.
type SourceAction interface{ sourceAction() }

// DestEvent is an event of the destination machine (dest.go).
type DestEvent interface{ destEvent() }

// DestAction is an action the destination machine asks its driver for.
type DestAction interface{ destAction() }

func (Start) sourceEvent()        {}
func (LocalChecked) sourceEvent() {}
func (CheckAnswer) sourceEvent()  {}
func (Dumped) sourceEvent()       {}
func (ReadyAnswer) sourceEvent()  {}
func (CopyGone) sourceEvent()     {}
func (CommitAnswer) sourceEvent() {}
func (PagesDone) sourceEvent()    {}
func (HomeAnswer) sourceEvent()   {}
func (Tick) sourceEvent()         {}
func (Written) sourceEvent()      {}
func (Sealed) sourceEvent()       {}
func (Delivered) sourceEvent()    {}

func (CheckLocal) sourceAction() {}
func (SendCheck) sourceAction()  {}
func (Persist) sourceAction()    {}
func (Dump) sourceAction()       {}
func (SendImages) sourceAction() {}
func (Thaw) sourceAction()       {}
func (Kill) sourceAction()       {}
func (SendCommit) sourceAction() {}
func (SendAbort) sourceAction()  {}
func (WaitPages) sourceAction()  {}
func (NoteHome) sourceAction()   {}
func (Finish) sourceAction()     {}
func (Wake) sourceAction()       {}
func (WriteFile) sourceAction()  {}
func (SealFile) sourceAction()   {}
func (Deliver) sourceAction()    {}
func (RemoveFile) sourceAction() {}

func (Offer) destEvent()         {}
func (Stream) destEvent()        {}
func (Received) destEvent()      {}
func (Restored) destEvent()      {}
func (CommitMsg) destEvent()     {}
func (AbortMsg) destEvent()      {}
func (Answered) destEvent()      {}
func (Tick) destEvent()          {}
func (Restart) destEvent()       {}
func (Verified) destEvent()      {}
func (ConsentAnswer) destEvent() {}
func (HomeDecided) destEvent()   {}
func (HomeTold) destEvent()      {}
func (Resumed) destEvent()       {}

func (PersistIn) destAction()    {}
func (Receive) destAction()      {}
func (Restore) destAction()      {}
func (Reply) destAction()        {}
func (Adopt) destAction()        {}
func (Resume) destAction()       {}
func (Discard) destAction()      {}
func (Ask) destAction()          {}
func (Wake) destAction()         {}
func (Verify) destAction()       {}
func (AskConsent) destAction()   {}
func (CommitAtHome) destAction() {}
func (TellHome) destAction()     {}
