CREATE TRIGGER fault_claims_record AFTER UPDATE OF fence ON jobs
FOR EACH ROW WHEN (NEW.fence > OLD.fence AND NEW.state = 'running')
EXECUTE FUNCTION fault_record_claim()
